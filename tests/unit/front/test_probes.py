"""/ping and /live answers from state (front/probes.py), as their routes send them."""

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


def test_ping_is_503_naming_the_loop_when_the_watchdog_sees_it_late() -> None:
    state = _ready()
    state.loop_verdict = lambda: "the event loop stalled for 12.0 s (NEURONSERVE_LIVE_LOOP_STALL_S=10)"
    no = probes.answer(state, "/ping")
    assert no.status_code == 503
    body = json.loads(no.body)
    assert body["phase"] == "READY" and body["loop"].startswith("the event loop stalled for 12.0 s")
    assert body["detail"] == body["loop"]
    state.loop_verdict = lambda: None
    assert probes.answer(state, "/ping").status_code == 200
