"""The session store: ids, expiry by the clock, closing one session or all of a replica's."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from tests.support.front_app import Front, running_front
from tests.support.replicas import Clock

from neuronserve.config.serve import parse_serve
from neuronserve.front.sessions import SessionsFull, SessionStore, expires_text
from neuronserve.types import ServeOptions


def test_session_store_expires_and_closes() -> None:
    clock = Clock()
    store = SessionStore(10.0, clock=clock)
    sid, expires = store.open(1)
    assert re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*", sid)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", expires_text(expires))
    assert store.lookup(sid) == 1
    clock.now += 9.9
    assert store.lookup(sid) == 1
    clock.now += 0.1
    assert store.lookup(sid) is None and not store.close(sid)
    a, _ = store.open(0)
    b, _ = store.open(1)
    assert store.close_replica(1) == 1
    assert store.lookup(b) is None and store.lookup(a) == 0
    assert store.close(a) and store.lookup(a) is None


def _store_from_env(env: dict[str, str], clock: Clock | None = None) -> SessionStore:
    """The store as the server builds it, from the settings (parse_serve reads the rows)."""
    opts, _ = parse_serve(env)
    if clock is None:
        return SessionStore(opts.session_ttl_s, max_sessions=opts.max_sessions)
    return SessionStore(opts.session_ttl_s, clock=clock, max_sessions=opts.max_sessions)


def test_the_cap_and_its_default() -> None:
    assert ServeOptions().max_sessions == 10_000
    store = _store_from_env({"NEURONSERVE_MAX_SESSIONS": "2"})
    store.open(0)
    store.open(0)
    with pytest.raises(SessionsFull, match="NEURONSERVE_MAX_SESSIONS"):
        store.open(0)


def test_expired_sessions_are_swept_without_their_ids_being_used() -> None:
    clock = Clock()
    store = _store_from_env(
        {"SAGEMAKER_SESSIONS_EXPIRATION": "10", "NEURONSERVE_MAX_SESSIONS": "1000"}, clock
    )
    for _ in range(1000):
        store.open(0)
    assert len(store) == 1000
    clock.now += 10  # the 1000 expire now
    sid, _ = store.open(1)  # sweeps them, and fits under the cap again
    assert len(store) == 1 and store.lookup(sid) == 1


def _session(front: Front, sid: str, body: object) -> Any:
    headers = {"x-amzn-sagemaker-session-id": sid}
    return front.client.post("/invocations", json=body, headers=headers)


def test_new_sessions_beyond_the_cap_are_429_until_one_closes() -> None:
    store = _store_from_env({"NEURONSERVE_MAX_SESSIONS": "3"})

    async def go() -> None:
        async with running_front(sessions=store) as front:
            opened = []
            for _ in range(3):
                r = await _session(front, "NEW_SESSION", {"requestType": "NEW_SESSION"})
                assert r.status_code == 200, r.text
                opened.append(r.json()["session_id"])
            r = await _session(front, "NEW_SESSION", {"requestType": "NEW_SESSION"})
            assert r.status_code == 429 and r.headers["retry-after"] == "1"
            err = r.json()["error"]
            assert err["type"] == "TooManyRequestsError" and "NEURONSERVE_MAX_SESSIONS" in err["message"]
            closed = await _session(front, opened[0], {"requestType": "CLOSE"})
            assert closed.status_code == 200
            r = await _session(front, "NEW_SESSION", {"requestType": "NEW_SESSION"})
            assert r.status_code == 200
            assert front.gate.in_flight == 0

    asyncio.run(go())


def test_expired_sessions_free_their_places_in_the_server() -> None:
    store = _store_from_env({"NEURONSERVE_MAX_SESSIONS": "2", "SAGEMAKER_SESSIONS_EXPIRATION": "0.2"})

    async def go() -> None:
        async with running_front(sessions=store) as front:
            for _ in range(2):
                assert (
                    await _session(front, "NEW_SESSION", {"requestType": "NEW_SESSION"})
                ).status_code == 200
            assert (await _session(front, "NEW_SESSION", {"requestType": "NEW_SESSION"})).status_code == 429
            await asyncio.sleep(0.3)
            assert (await _session(front, "NEW_SESSION", {"requestType": "NEW_SESSION"})).status_code == 200
            assert len(store) == 1

    asyncio.run(go())


@pytest.mark.parametrize(
    "raw",
    [
        b'{"requestType": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"requestType": ' + b'{"a":' * 70 + b"1" + b"}" * 70 + b"}",
        b'{"requestType": "\xff\xfe"}',
    ],
)
def test_hostile_session_bodies_are_400_not_500(raw: bytes) -> None:
    store = SessionStore(60.0)

    async def go() -> None:
        async with running_front(sessions=store) as front:
            for sid in ("NEW_SESSION", "some-id"):
                headers = {"x-amzn-sagemaker-session-id": sid, "content-type": "application/json"}
                r = await front.client.post("/invocations", content=raw, headers=headers)
                assert r.status_code == 400, r.text
                assert r.json()["error"]["code"] == 400

    asyncio.run(go())
