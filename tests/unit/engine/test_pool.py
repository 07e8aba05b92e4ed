"""Replica supervision with real (tiny) processes and a fake clock (the routing choice and the session
store are tested beside their modules: tests/unit/front/test_router.py, test_sessions.py)."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

import pytest
from tests.support.replicas import Clock, make_plan

from neuronserve.engine.pool import BACKOFF_MAX_S, HEALTHY_RESET_S, Replica, ReplicaPool, RPhase


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


def _serving_pool(tmp_path: object, **serve: object) -> ReplicaPool:
    plan = make_plan(2, str(tmp_path))
    plan = replace(plan, serve=replace(plan.serve, **serve))
    p = ReplicaPool(plan, {"PATH": os.environ.get("PATH", "")}, clock=Clock())
    p.start_initial(compile_first=False)
    for r in p.replicas:
        p.mark_ready(r)
    p.server_ready = True
    return p


def _die_and_restart(pool: ReplicaPool, r: Replica) -> object:
    """Kill `r`, let the pool see it, wait out its backoff, restart it and mark it READY."""
    _kill(r)
    fatal = pool.poll()
    if fatal is not None:
        return fatal
    clock = pool.clock
    assert isinstance(clock, Clock)
    clock.now = r.retry_at
    pool.poll()
    assert r.phase == RPhase.LOADING
    pool.mark_ready(r)
    return None


def test_backoff_starts_over_after_a_healthy_period(tmp_path: object) -> None:
    pool = _serving_pool(tmp_path, max_restarts=100)
    clock = pool.clock
    assert isinstance(clock, Clock)
    try:
        victim = pool.replicas[1]
        for _ in range(6):  # a crash loop: 1, 2, 4, 8, 16, 30 s
            assert _die_and_restart(pool, victim) is None
        _kill(victim)
        pool.poll()
        assert victim.retry_at - clock.now == pytest.approx(BACKOFF_MAX_S)
        clock.now = victim.retry_at
        pool.poll()
        pool.mark_ready(victim)
        clock.now += HEALTHY_RESET_S  # it served a good while, then died once more
        _kill(victim)
        pool.poll()
        assert victim.retry_at - clock.now == pytest.approx(1.0)  # back to the first step, not 30 s
    finally:
        pool.stop_all(grace_s=1)


def test_too_many_deaths_in_the_window_are_fatal(tmp_path: object) -> None:
    pool = _serving_pool(tmp_path, max_restarts=2, restart_window_s=100.0)
    try:
        victim = pool.replicas[1]
        assert _die_and_restart(pool, victim) is None
        assert _die_and_restart(pool, victim) is None
        _kill(victim)
        fatal = pool.poll()  # the third death within 100 s: two restarts were allowed
        assert fatal is not None
        assert (
            "replica 1's engine failed 3 times within 100 s (last: engine exited with code -9)"
            in fatal.message
        )
        assert (
            "NEURONSERVE_MAX_RESTARTS=2" in fatal.message
            and "NEURONSERVE_RESTART_WINDOW_S=100" in fatal.message
        )
        assert victim.phase == RPhase.FAILED
    finally:
        pool.stop_all(grace_s=1)


def test_deaths_outside_the_window_do_not_count(tmp_path: object) -> None:
    pool = _serving_pool(tmp_path, max_restarts=1, restart_window_s=100.0)
    clock = pool.clock
    assert isinstance(clock, Clock)
    try:
        victim = pool.replicas[1]
        assert _die_and_restart(pool, victim) is None
        clock.now += 150.0  # the first death is out of the window now
        assert _die_and_restart(pool, victim) is None
        assert victim.restarts == 2
    finally:
        pool.stop_all(grace_s=1)


def test_no_restarts_allowed_makes_the_first_death_fatal(tmp_path: object) -> None:
    pool = _serving_pool(tmp_path, max_restarts=0)
    try:
        _kill(pool.replicas[0])
        fatal = pool.poll()
        assert fatal is not None and "NEURONSERVE_MAX_RESTARTS=0" in fatal.message
    finally:
        pool.stop_all(grace_s=1)


def test_failed_restarts_count_against_the_limit(tmp_path: object) -> None:
    """A replica whose engine cannot even be started again is not retried forever either."""
    pool = _serving_pool(tmp_path, max_restarts=2)
    clock = pool.clock
    assert isinstance(clock, Clock)
    try:
        victim = pool.replicas[1]
        _kill(victim)
        assert pool.poll() is None
        victim.spec = replace(victim.spec, argv=("/nonexistent/engine",))  # exec fails from now on
        clock.now = victim.retry_at
        assert pool.poll() is None and victim.phase == RPhase.RESTARTING  # 2 failures: allowed
        clock.now = victim.retry_at
        fatal = pool.poll()
        assert fatal is not None and "failed 3 times" in fatal.message and "restart failed" in fatal.message
    finally:
        pool.stop_all(grace_s=1)


def test_stuck_says_why_no_engine_can_go_on(pool: ReplicaPool) -> None:
    """/live's engine check: running or due a restart is progress; a replica WAITING for a dead
    replica 0, or every engine dead, is not."""
    pool.start_initial(compile_first=True)
    assert pool.stuck() is None  # replica 0 compiles, replica 1 waits for it
    _kill(pool.replicas[0])
    why = pool.stuck()  # before the supervisor's poll even saw the death
    assert why is not None and "no engine replica is running or due a restart" in why
    assert "replica 1 WAITING" in why


def test_stuck_is_none_while_a_dead_replica_is_due_a_restart(pool: ReplicaPool) -> None:
    pool.start_initial(compile_first=False)
    for r in pool.replicas:
        pool.mark_ready(r)
    pool.server_ready = True
    _kill(pool.replicas[1])
    assert pool.poll() is None and pool.replicas[1].phase == RPhase.RESTARTING
    _kill(pool.replicas[0])
    assert pool.stuck() is None  # replica 1 restarts after its backoff (or the poll ends the server)


def test_one_engine_dead_is_stuck_at_once(tmp_path: object) -> None:
    p = ReplicaPool(make_plan(1, str(tmp_path)), {"PATH": os.environ.get("PATH", "")}, clock=Clock())
    try:
        p.start_initial(compile_first=False)
        assert p.stuck() is None
        _kill(p.replicas[0])
        assert p.stuck() == "the engine exited with code -9 and nothing restarts it"
    finally:
        p.stop_all(grace_s=1)
