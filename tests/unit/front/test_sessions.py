"""The session store: ids, expiry by the clock, closing one session or all of a replica's."""

from __future__ import annotations

import re

from tests.support.replicas import Clock

from neuronserve.front.sessions import SessionStore, expires_text


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
