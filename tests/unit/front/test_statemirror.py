"""A worker's mirror of the supervisor's state says what the supervisor's own state says, in every
phase: /ping's answer and body, /live, the model names at READY; and it reports a supervisor that
stopped polling."""

from __future__ import annotations

import pytest
from tests.support.replicas import Clock

from neuronserve.front.board import Board
from neuronserve.front.state import Phase, ServerState
from neuronserve.front.statemirror import MirroredState, publish
from neuronserve.types import Progress


def _pair(clock: Clock) -> tuple[ServerState, MirroredState, Board]:
    board = Board.create(workers=1, replicas=1, sessions=0)
    supervisor = ServerState(clock=clock)
    supervisor.stage_stall_s = 30.0
    supervisor.on_change(lambda: publish(board, supervisor, None))
    mirror = MirroredState(board, clock=clock)
    mirror.stage_stall_s = 30.0
    return supervisor, mirror, board


def _same(supervisor: ServerState, mirror: MirroredState) -> None:
    assert mirror.phase == supervisor.phase
    assert mirror.ready() == supervisor.ready()
    assert mirror.ping_body() == supervisor.ping_body()
    assert mirror.live() == supervisor.live()


def test_every_phase_reads_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("neuronserve.front.statemirror.time.monotonic", clock)
    supervisor, mirror, board = _pair(clock)
    publish(board, supervisor, None)
    _same(supervisor, mirror)
    supervisor.set_progress(Progress("model s3://b/m/", 512, 2048, 100.0, 15.4))
    clock.now += 2
    publish(board, supervisor, None)
    _same(supervisor, mirror)
    assert mirror.ping_body()["progress"]["percent"] == 25.0
    clock.now += 40  # staging stalled past NEURONSERVE_LIVE_STAGE_STALL_S: both say so
    publish(board, supervisor, None)
    assert not mirror.live()[0]
    _same(supervisor, mirror)
    supervisor.move(Phase.LOADING, "engine pid 42")
    _same(supervisor, mirror)
    supervisor.model_name, supervisor.model_names = "m", ["m", "adapter"]
    supervisor.set_engine_health(True)
    supervisor.move(Phase.READY, "model m")
    assert mirror.phase == Phase.READY and mirror.model_names == ["m", "adapter"]  # with the phase
    _same(supervisor, mirror)
    supervisor.set_engine_health(False)
    publish(board, supervisor, None)
    _same(supervisor, mirror)
    assert mirror.ping_body()["detail"] == "engine health check failing"
    supervisor.set_engine_health(True)
    supervisor.engine_alive = lambda: False  # the engine died: FAILED in the body at once
    publish(board, supervisor, None)
    _same(supervisor, mirror)
    assert mirror.ping_body()["phase"] == "FAILED"
    supervisor.move(Phase.DRAINING, "2 request(s) in flight")
    _same(supervisor, mirror)
    supervisor.move(Phase.FAILED, "the engine exited with code -9")
    _same(supervisor, mirror)
    assert mirror.live()[1]["checks"]["engine"].startswith("the server failed")


def test_the_supervisors_verdict_and_its_silence(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("neuronserve.front.statemirror.time.monotonic", clock)
    supervisor, mirror, board = _pair(clock)
    publish(board, supervisor, "the engine exited with code 1 and nothing restarts it")
    assert mirror.live()[1]["checks"]["engine"] == "the engine exited with code 1 and nothing restarts it"
    publish(board, supervisor, None)
    assert mirror.live()[0]
    clock.now += 31  # no poll for longer than SUPERVISOR_STALL_S
    live, body = mirror.live()
    assert not live and body["checks"]["engine"] == "the engine supervisor has not polled for 31 s"


def test_a_worker_never_moves_the_phase() -> None:
    mirror = MirroredState(Board.create(workers=1, replicas=1, sessions=0))
    assert mirror.phase == Phase.STAGING  # a fresh board: nothing published yet
    with pytest.raises(RuntimeError):
        mirror.move(Phase.READY)
