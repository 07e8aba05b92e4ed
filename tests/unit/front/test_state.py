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
