"""Replica supervision, routing choice and the session store, with real (tiny) processes and a fake clock."""

from __future__ import annotations

import os
import re
import signal
import sys
import time

import pytest

from neuronserve.engine.pool import Replica, ReplicaPool, RPhase
from neuronserve.front.router import Router
from neuronserve.front.sessions import SessionStore, expires_text
from neuronserve.types import LaunchPlan, ModelSpec, ReplicaSpec, ServeOptions

SLEEPER = (sys.executable, "-c", "import time; time.sleep(60)", "--port", "0")


def make_plan(n: int, tmp: str, min_ready: int | None = None) -> LaunchPlan:
    specs = tuple(ReplicaSpec(i, SLEEPER, {}, str(i), 9000 + i) for i in range(n))
    return LaunchPlan(
        device="cpu",
        argv=SLEEPER,
        env={},
        model=ModelSpec("local", "/m", "/m"),
        neuron_override=None,
        cache_key=None,
        warnings=(),
        work_dir=tmp,
        serve=ServeOptions(min_ready_replicas=min_ready),
        replicas=specs,
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


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


def test_router_least_outstanding_ties_round_robin(pool: ReplicaPool) -> None:
    pool.start_initial(compile_first=False)
    for r in pool.replicas:
        pool.mark_ready(r)
    router = Router(pool, 10.0, 8)
    assert [router.pick([]).index for _ in range(4)] == [0, 1, 0, 1]  # type: ignore[union-attr]
    pool.replicas[0].outstanding = 2
    assert [router.pick([]).index for _ in range(3)] == [1, 1, 1]  # type: ignore[union-attr]
    pool.replicas[1].outstanding = 3
    assert router.pick([]).index == 0  # type: ignore[union-attr]
    assert router.pick([pool.replicas[0]]).index == 1  # type: ignore[union-attr]
    pool.replicas[1].healthy = False  # healthy replicas first, even if busier
    assert router.pick([]).index == 0  # type: ignore[union-attr]
    pool.replicas[0].phase = RPhase.RESTARTING
    assert router.pick([]).index == 1  # type: ignore[union-attr]


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


def test_metrics_merge_is_one_valid_exposition_with_replica_labels() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from neuronserve.front.replica_metrics import merge

    one = (
        "# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m"} 1.0\n'
        "# HELP vllm:e2e Latency.\n# TYPE vllm:e2e histogram\n"
        'vllm:e2e_bucket{le="1.0",model_name="m"} 2.0\nvllm:e2e_bucket{le="+Inf",model_name="m"} 3.0\n'
        'vllm:e2e_count{model_name="m"} 3.0\nvllm:e2e_sum{model_name="m"} 1.5\n'
    )
    text = merge({0: one, 1: one.replace("} 1.0", "} 4.0")})
    families = {f.name: f for f in text_string_to_metric_families(text)}
    running = families["vllm:num_requests_running"].samples
    assert {(s.labels["replica"], s.value) for s in running} == {("0", 1.0), ("1", 4.0)}
    assert all(s.labels["model_name"] == "m" for s in running)
    assert len(families["vllm:e2e"].samples) == 8
    assert text.count("# TYPE vllm:e2e histogram") == 1


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
