"""The /ping state machine: allowed moves, readiness, and the 503 body."""

from __future__ import annotations

import pytest

from neuronserve.front.state import Phase, ServerState, TransitionError
from neuronserve.types import Progress


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_happy_path_and_readiness_needs_engine_health() -> None:
    s = ServerState()
    assert s.phase == Phase.STAGING and not s.ready()
    s.move(Phase.LOADING)
    s.set_engine_health(True)
    assert not s.ready()  # healthy engine but not READY yet
    s.move(Phase.READY)
    assert s.ready()
    s.set_engine_health(False)
    assert not s.ready()
    assert s.ping_body()["detail"] == "engine health check failing"


@pytest.mark.parametrize(
    ("path", "bad"),
    [
        ([], Phase.READY),  # STAGING cannot skip loading
        ([Phase.LOADING, Phase.READY, Phase.DRAINING], Phase.READY),  # draining never comes back
        ([Phase.FAILED], Phase.LOADING),  # failed is terminal
        ([Phase.LOADING, Phase.FAILED], Phase.DRAINING),
    ],
)
def test_forbidden_moves(path: list[Phase], bad: Phase) -> None:
    s = ServerState()
    for p in path:
        s.move(p)
    with pytest.raises(TransitionError):
        s.move(bad)


def test_leaving_ready_drops_health_and_same_phase_is_noop() -> None:
    s = ServerState()
    s.move(Phase.LOADING)
    s.move(Phase.READY)
    s.set_engine_health(True)
    assert s.move(Phase.READY) is False
    s.move(Phase.DRAINING, "2 in flight")
    assert not s.ready()
    assert s.ping_body()["phase"] == "DRAINING"
    assert s.ping_body()["detail"] == "2 in flight"


def test_staging_body_has_progress_and_elapsed() -> None:
    clock = Clock()
    s = ServerState(clock=clock)
    s.set_progress(Progress("model s3://b/m/", done_bytes=50, total_bytes=200, rate_bps=10.0, eta_s=15.0))
    clock.t += 3.0
    body = s.ping_body()
    assert body["phase"] == "STAGING"
    assert body["progress"] == {
        "what": "model s3://b/m/",
        "done_bytes": 50,
        "total_bytes": 200,
        "percent": 25.0,
        "eta_s": 15.0,
    }
    assert body["elapsed_s"] == 3.0


def test_engine_death_is_seen_at_once() -> None:
    s = ServerState()
    s.move(Phase.LOADING)
    s.move(Phase.READY)
    s.set_engine_health(True)
    alive = [True]
    s.engine_alive = lambda: alive[0]
    assert s.ready()
    alive[0] = False
    assert not s.ready()
    assert s.ping_body()["phase"] == "FAILED"


def _progress(what: str, done: int) -> Progress:
    return Progress(what, done_bytes=done, total_bytes=1000, rate_bps=1.0, eta_s=None)


def test_live_in_every_phase_that_makes_progress() -> None:
    s = ServerState()
    for phase in (Phase.LOADING, Phase.READY, Phase.DRAINING):
        live, body = s.live()
        assert live and "failed" not in body, body
        assert body["checks"] == {"loop": "ok", "stage": "ok", "engine": "ok"}
        s.move(phase)
    assert s.live() == (True, {"live": True, "phase": "DRAINING", "checks": body["checks"]})


def test_staging_that_stops_advancing_is_not_live_and_comes_back_when_it_moves() -> None:
    clock = Clock()
    s = ServerState(clock=clock)
    s.stage_stall_s = 60.0
    s.set_progress(_progress("model s3://b/m/", 10))
    clock.t += 59.0
    s.set_progress(_progress("model s3://b/m/", 10))  # the ticker reports the same bytes: no advance
    assert s.live()[0]
    clock.t += 2.0
    live, body = s.live()
    assert not live and body["failed"] == ["stage"]
    assert body["checks"]["stage"] == (
        "staging has not advanced for 61 s (NEURONSERVE_LIVE_STAGE_STALL_S=60); "
        "last: model s3://b/m/ at 10 bytes"
    )
    s.set_progress(_progress("model s3://b/m/", 11))  # one more byte: it moves
    assert s.live()[0]
    clock.t += 61.0
    s.set_progress(_progress("artifacts s3://b/c/", 11))  # the next step, same count: it moves
    assert s.live()[0]


def test_stage_stall_counts_from_the_phase_start_and_0_is_never() -> None:
    clock = Clock()
    s = ServerState(clock=clock)
    clock.t += 10_000.0
    assert s.live()[0]  # the bound is off by default (serve sets it from its row)
    s.stage_stall_s = 600.0
    assert s.live()[1]["checks"]["stage"].startswith("staging has not advanced for 10000 s")
    s.move(Phase.LOADING)  # compiling is never a staging stall, however long it is quiet
    clock.t += 10_000.0
    assert s.live()[0]


def test_hooks_and_failed_phase_name_the_check() -> None:
    s = ServerState()
    s.loop_verdict = lambda: "the event loop has not run for 12.0 s"
    live, body = s.live()
    assert not live and body["failed"] == ["loop"] and body["checks"]["loop"].startswith("the event loop")
    s.loop_verdict = lambda: None
    s.move(Phase.FAILED, "staging failed: no such bucket")
    live, body = s.live()
    assert not live and body["failed"] == ["stage"] and body["phase"] == "FAILED"
    assert body["checks"]["stage"] == "the server failed and is exiting: staging failed: no such bucket"

    s = ServerState()
    s.move(Phase.LOADING)
    s.supervisor_verdict = lambda: "the engine exited with code -9 and nothing restarts it"
    assert s.live()[1]["failed"] == ["engine"]
    s.move(Phase.FAILED, "the engine exited with code -9")
    live, body = s.live()
    assert not live and body["failed"] == ["engine"]
    assert body["checks"]["engine"] == "the server failed and is exiting: the engine exited with code -9"
