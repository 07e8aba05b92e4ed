"""The gate through the real app, in front of the recording stand-in engine: request ids (the client's
echoed when safe, replaced with a warning when not, every engine call its own) and the body read
before the slot (oversized bodies refused in the route's shape, a body that never comes is 408)."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
from tests.support.front_app import running_front

from neuronserve.front.requestid import SAFE

BODY = {"prompt": "hi", "max_tokens": 1}


def test_two_concurrent_requests_with_one_id_reach_the_engine_with_different_ids() -> None:
    """vLLM 0.11.0 takes X-Request-Id as its request id: one client id on two requests collided."""

    async def run() -> None:
        async with running_front() as front:
            answers = await asyncio.gather(
                *(
                    front.client.post(path, json=BODY, headers={"x-request-id": "same-id"})
                    for path in ("/v1/completions", "/v1/completions", "/invocations")
                )
            )
            assert [r.status_code for r in answers] == [200, 200, 200]
            assert all(r.headers["x-request-id"] == "same-id" for r in answers)  # the client's, echoed
            assert len(front.ids) == 3 and len(set(front.ids)) == 3, front.ids
            assert all(re.fullmatch(r"same-id-[0-9a-f]+", rid) for rid in front.ids), front.ids

    asyncio.run(run())


@pytest.mark.parametrize(
    "raw",
    ["with space", "k=v request_id=forged", "x" * 129, "tab\there", "new\nline", 'quote"d', "ünï"],
)
def test_an_unsafe_id_is_replaced_and_warned_about(raw: str, caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        async with running_front() as front:
            with caplog.at_level(logging.WARNING, logger="neuronserve.front"):
                r = await front.client.get("/v1/models", headers={"x-request-id": raw.encode("utf-8")})
            echoed = r.headers["x-request-id"]
            assert r.status_code == 200 and echoed != raw and SAFE.fullmatch(echoed)
            assert front.ids[-1].startswith(echoed + "-")
            assert any(f"replaced by {echoed}" in m for m in caplog.messages), caplog.messages

    asyncio.run(run())


def test_the_longest_safe_id_and_sagemakers_id_are_kept() -> None:
    async def run() -> None:
        async with running_front() as front:
            longest = "A-z0.9_:" * 16
            r = await front.client.get("/v1/models", headers={"x-request-id": longest})
            assert r.headers["x-request-id"] == longest
            sm = "0f8fad5b-d9cb-469f-a165-70867728950e"
            r = await front.client.get("/v1/models", headers={"x-amzn-sagemaker-inference-id": sm})
            assert r.headers["x-request-id"] == sm and front.ids[-1].startswith(sm + "-")

    asyncio.run(run())


@pytest.mark.parametrize(("path", "shape"), [("/v1/completions", "openai"), ("/generate", "tgi")])
def test_a_body_over_the_limit_is_refused_in_the_routes_shape(path: str, shape: str) -> None:
    """The gate reads the body before the slot, up to the limit, and hands an oversized one over
    unfinished: the route refuses it (413) in its own error shape, declared or streamed."""

    async def chunks() -> object:
        for _ in range(3):
            yield b"x" * (512 * 1024)

    async def run() -> None:
        async with running_front(max_payload_mb=1.0) as front:
            for content in (b"x" * (2 << 20), chunks()):
                headers = {"content-type": "application/json"}
                r = await front.client.post(path, content=content, headers=headers)
                assert r.status_code == 413, r.text
                body = r.json()
                assert (body["error"]["code"] == 413) if shape == "openai" else ("error_type" in body)
            assert front.ids == [] and front.gate.in_flight == 0

    asyncio.run(run())


def test_a_body_that_never_comes_is_408_without_taking_a_slot() -> None:
    """The gate's body deadline, in process: the app is never called, no slot is taken, and the
    answer asks the server to close the connection (the rest of the body is never read)."""
    from neuronserve.front.gate import Gate
    from neuronserve.front.state import Phase, ServerState

    called: list[object] = []

    async def app(*args: object) -> None:
        called.append(args)

    async def run() -> None:
        state = ServerState()
        state.move(Phase.LOADING)
        state.set_engine_health(True)
        state.move(Phase.READY)
        gate = Gate(app, state, 1, body_timeout_s=0.2)
        seen: list[dict[str, object]] = []
        slots: list[int] = []

        async def never() -> dict[str, object]:
            slots.append(gate.in_flight)
            await asyncio.sleep(3600)
            raise AssertionError("unreachable")

        async def send(message: dict[str, object]) -> None:
            seen.append(message)

        scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": []}
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(gate(scope, never, send), timeout=5)
        assert asyncio.get_running_loop().time() - started < 2
        assert seen[0]["status"] == 408 and (b"connection", b"close") in seen[0]["headers"]  # type: ignore[operator]
        assert b"NEURONSERVE_BODY_TIMEOUT_S" in seen[1]["body"]  # type: ignore[operator]
        assert called == [] and slots == [0] and gate.in_flight == 0

    asyncio.run(run())


def test_a_declared_length_over_the_limit_is_handed_over_unread() -> None:
    """Content-Length over the limit: the gate never calls receive() (uvicorn would answer an
    `Expect: 100-continue` with "100 Continue" on the first one), and the app gets the request at
    once with its body unfinished, to refuse it from the header."""
    from neuronserve.front.gate import Gate, declared_over
    from neuronserve.front.state import Phase, ServerState

    got: list[object] = []

    async def app(scope: object, receive: object, send: object) -> None:
        got.append(await receive())  # type: ignore[operator]

    async def run() -> None:
        state = ServerState()
        state.move(Phase.LOADING)
        state.set_engine_health(True)
        state.move(Phase.READY)
        gate = Gate(app, state, 1, body_timeout_s=30, max_body_bytes=1024)
        received: list[int] = []

        async def receive() -> dict[str, object]:
            received.append(1)
            await asyncio.sleep(3600)
            raise AssertionError("unreachable")

        async def send(message: dict[str, object]) -> None:
            return None

        headers = [(b"content-type", b"application/json"), (b"content-length", b"1025")]
        scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": headers}
        await asyncio.wait_for(gate(scope, receive, send), timeout=2)
        assert received == [] and got == [{"type": "http.request", "body": b"", "more_body": True}]

    asyncio.run(run())
    at = {"headers": [(b"content-length", b"1024")]}
    assert not declared_over(at, 1024) and declared_over({"headers": [(b"content-length", b"1025")]}, 1024)
    assert not declared_over({"headers": [(b"content-length", "²".encode())]}, 1) and not declared_over({}, 1)
