"""/ping and /live answers from state (front/probes.py): the bytes both the route and the probe door send."""

from __future__ import annotations

import json

from neuronserve.front import probes
from neuronserve.front.state import Phase, ServerState


def _ready() -> ServerState:
    state = ServerState()
    state.move(Phase.LOADING)
    state.set_engine_health(True)
    state.move(Phase.READY)
    return state


def test_ping_is_an_empty_200_when_ready_and_a_503_naming_the_phase_otherwise() -> None:
    ok = probes.answer(_ready(), "/ping")
    assert (ok.status_code, ok.body) == (200, b"")
    loading = ServerState()
    loading.move(Phase.LOADING)
    no = probes.answer(loading, "/ping")
    assert no.status_code == 503
    assert json.loads(no.body)["phase"] == "LOADING"
    assert (b"content-type", b"application/json") in no.raw_headers


def test_live_names_every_check_and_the_failed_ones() -> None:
    state = _ready()
    ok = probes.answer(state, "/live")
    assert ok.status_code == 200
    assert json.loads(ok.body)["checks"] == {"loop": "ok", "stage": "ok", "engine": "ok"}
    state.loop_verdict = lambda: "the event loop has not run for 9 s"
    stalled = probes.answer(state, "/live")
    assert stalled.status_code == 503
    assert json.loads(stalled.body)["failed"] == ["loop"]
