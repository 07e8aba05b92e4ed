"""The router's choice of replica: least outstanding, ties round robin, healthy first."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
from tests.support.replicas import Clock, make_plan

from neuronserve.engine.pool import ReplicaPool, RPhase
from neuronserve.front.router import Router


@pytest.fixture
def pool(tmp_path: object) -> Iterator[ReplicaPool]:
    p = ReplicaPool(make_plan(2, str(tmp_path)), {"PATH": os.environ.get("PATH", "")}, clock=Clock())
    yield p
    p.stop_all(grace_s=1)


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


def test_one_replica_is_picked_only_while_routable_and_not_excluded(tmp_path: object) -> None:
    """The one-replica path (no data parallel) answers as the general rule does: the replica while it
    is READY with a live process, healthy or not; None once it is excluded, not ready, or dead."""
    one = ReplicaPool(make_plan(1, str(tmp_path)), {"PATH": os.environ.get("PATH", "")}, clock=Clock())
    try:
        router = Router(one, 10.0, 8)
        only = one.replicas[0]
        assert router.pick([]) is None  # not started
        one.start_initial(compile_first=False)
        one.mark_ready(only)
        assert router.pick([]) is only
        only.healthy = False  # a failing health check alone does not stop traffic
        assert router.pick([]) is only
        assert router.pick([only]) is None  # tried already: no other to retry on
        only.phase = RPhase.RESTARTING
        assert router.pick([]) is None
        only.phase = RPhase.READY
        proc = only.proc
        assert proc is not None and proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while proc.returncode() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert router.pick([]) is None  # its process is gone: seen at once, not at the next health check
    finally:
        one.stop_all(grace_s=1)
