"""The router's choice of replica: least outstanding, ties round robin, healthy first."""

from __future__ import annotations

import os
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
