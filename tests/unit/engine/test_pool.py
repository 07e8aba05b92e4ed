"""Replica supervision with real (tiny) processes and a fake clock (the routing choice and the session
store are tested beside their modules: tests/unit/front/test_router.py, test_sessions.py)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from tests.support.replicas import Clock, make_plan

from neuronserve.engine.pool import Replica, ReplicaPool, RPhase


@pytest.fixture
def pool(tmp_path: object) -> ReplicaPool:
    clock = Clock()
    p = ReplicaPool(make_plan(2, str(tmp_path)), {"PATH": os.environ.get("PATH", "")}, clock=clock)
    yield p
    p.stop_all(grace_s=1)


def _kill(r: Replica) -> None:
    assert r.proc is not None and r.proc.pid is not None
    os.kill(r.proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while r.proc.returncode() is None and time.monotonic() < deadline:
        time.sleep(0.01)


def test_dead_replica_restarts_on_its_cores_after_backoff_and_closes_sessions(pool: ReplicaPool) -> None:
    closed: list[int] = []
    pool.on_replaced = closed.append
    pool.start_initial(compile_first=False)
    for r in pool.replicas:
        pool.mark_ready(r)
    pool.server_ready = True
    victim = pool.replicas[1]
    old_pid = victim.proc.pid if victim.proc else None
    _kill(victim)
    assert pool.poll() is None  # replica 0 serves: not fatal
    assert victim.phase == RPhase.RESTARTING and closed == [1]
    assert pool.enough_ready()  # after start one READY replica is enough
    clock = pool.clock
    assert isinstance(clock, Clock)
    clock.now += 0.5
    pool.poll()
    assert victim.phase == RPhase.RESTARTING  # still inside its 1 s backoff
    clock.now += 0.6
    pool.poll()
    assert victim.phase == RPhase.LOADING and victim.restarts == 1
    assert victim.proc is not None and victim.proc.pid != old_pid and victim.spec.cores == "1"
    # A second death backs off twice as long.
    pool.mark_ready(victim)
    _kill(victim)
    pool.poll()
    assert victim.retry_at - clock.now == pytest.approx(2.0)


def test_no_replica_left_is_fatal(pool: ReplicaPool) -> None:
    pool.start_initial(compile_first=False)
    for r in pool.replicas:
        pool.mark_ready(r)
    pool.server_ready = True
    _kill(pool.replicas[0])
    assert pool.poll() is None
    _kill(pool.replicas[1])
    fatal = pool.poll()
    assert fatal is not None and "no other replica is READY" in fatal.message


def test_death_before_ready_is_fatal_when_too_few_remain(pool: ReplicaPool) -> None:
    pool.start_initial(compile_first=False)
    _kill(pool.replicas[1])
    fatal = pool.poll()  # default min ready at start = all replicas
    assert fatal is not None and "replica 1's engine exited" in fatal.message
    assert pool.replicas[1].phase == RPhase.FAILED  # never restarted: it never worked


def test_compile_first_starts_only_replica_0(pool: ReplicaPool) -> None:
    pool.start_initial(compile_first=True)
    assert [r.phase for r in pool.replicas] == [RPhase.LOADING, RPhase.WAITING]
    assert pool.describe()[1]["phase"] == "WAITING"
    pool.start_waiting()
    assert pool.replicas[1].phase == RPhase.LOADING


def test_min_ready_setting_applies_at_start(tmp_path: object) -> None:
    p = ReplicaPool(
        make_plan(2, str(tmp_path), min_ready=1), {"PATH": os.environ.get("PATH", "")}, clock=Clock()
    )
    try:
        p.start_initial(compile_first=False)
        assert not p.enough_ready()
        p.mark_ready(p.replicas[0])
        assert p.enough_ready()  # 1 of 2 is enough when NEURONSERVE_MIN_READY_REPLICAS=1
        default = ReplicaPool(make_plan(2, str(tmp_path)), {}, clock=Clock())
        default.replicas[0].proc, default.replicas[0].phase = p.replicas[0].proc, RPhase.READY
        default.replicas[0].healthy = True
        assert not default.enough_ready()  # default: all replicas at start
        default.server_ready = True
        assert default.enough_ready()  # then one
    finally:
        p.stop_all(grace_s=1)
