"""A worker's view of the replicas: what the supervisor wrote decides routing, each worker's counts
are its own, and /metrics sums them."""

from __future__ import annotations

import asyncio

from tests.support import boardproc

from neuronserve.engine.pool import RPhase
from neuronserve.front.board import Board
from neuronserve.front.fleetview import RPHASES, FleetView
from neuronserve.front.replica_metrics import ReplicaCounts
from neuronserve.front.router import Router, routable

URLS = ["http://127.0.0.1:9001", "http://127.0.0.1:9002"]
READY = RPHASES.index(RPhase.READY)


def test_routing_reads_the_supervisors_replicas() -> None:
    board = Board.create(workers=2, replicas=2, sessions=0)
    fleet = FleetView(board, 0, URLS)

    async def go() -> None:
        router = Router(fleet, 5.0, 8, fleet.counts)
        try:
            assert router.pick([]) is None  # nothing READY yet
            board.set_replica(1, READY, healthy=True, alive=True, restarts=2)
            assert router.pick([]) is fleet.replicas[1]
            board.set_replica(0, READY, healthy=True, alive=False, restarts=0)  # its engine is gone
            assert not routable(fleet.replicas[0]) and router.pick([]) is fleet.replicas[1]
            board.set_replica(0, READY, healthy=True, alive=True, restarts=0)
            fleet.replicas[1].outstanding += 1  # this worker's own count decides
            assert router.pick([]) is fleet.replicas[0]
        finally:
            await router.aclose()

    asyncio.run(go())
    assert fleet.replicas[1].phase == RPhase.READY and fleet.replicas[1].restarts == 2
    assert fleet.replicas[1].base_url == URLS[1]


def test_counts_are_summed_over_the_workers() -> None:
    board = Board.create(workers=2, replicas=2, sessions=0)
    board.set_replica(0, READY, healthy=True, alive=True, restarts=0)
    mine = FleetView(board, 0, URLS)
    mine.replicas[0].routed += 3
    mine.replicas[0].outstanding += 1
    boardproc.run(
        board,
        """
        from neuronserve.front.fleetview import FleetView
        theirs = FleetView(board, 1, ["a", "b"])
        theirs.replicas[0].routed += 4
        theirs.replicas[0].outstanding += 2
        theirs.replicas[1].routed += 1
        """,
    )
    assert mine.replicas[0].outstanding == 1  # its own
    assert mine.counts() == [ReplicaCounts(0, 7, 3, 0, True), ReplicaCounts(1, 1, 0, 0, False)]
