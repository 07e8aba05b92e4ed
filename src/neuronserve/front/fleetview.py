"""A front worker's view of the engine replicas, read from the board the supervisor writes.

Why a view: the replicas (their processes, health checks and restarts) belong to the supervisor
(engine/pool.py); a worker only routes. It reads each replica's phase, health and liveness from the
board (front/board.py, written by the supervisor at every poll: within 100 ms), and keeps its own
outstanding and routed counts in its own row there, so /metrics can sum them over the workers.

Routing by least outstanding requests uses this worker's own counts (reading every worker's row on
each pick would cost more than it balances): each worker balances what it sends, SO_REUSEPORT spreads
the connections over the workers, and each worker's round robin on ties starts at its own replica.
"""

from __future__ import annotations

from neuronserve.engine.pool import RPhase
from neuronserve.front.board import Board
from neuronserve.front.replica_metrics import ReplicaCounts

RPHASES = tuple(RPhase)  # the board's phase code is an index into this


class _Alive:
    """The replica's engine process as routing asks about it: running or not (the supervisor's poll)."""

    def __init__(self, view: ReplicaView) -> None:
        self._view = view

    def returncode(self) -> int | None:
        return None if self._view.board.replica(self._view.index)[2] else 0


class ReplicaView:
    def __init__(self, board: Board, worker: int, index: int, base_url: str) -> None:
        self.board = board
        self._index = index
        self._base_url = base_url
        self._row = board.row(worker, index)
        self._proc = _Alive(self)

    @property
    def index(self) -> int:
        return self._index

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def phase(self) -> RPhase:
        return RPHASES[self.board.replica(self._index)[0]]

    @property
    def healthy(self) -> bool:
        return self.board.replica(self._index)[1]

    @property
    def restarts(self) -> int:
        return self.board.replica(self._index)[4]

    @property
    def proc(self) -> _Alive:
        return self._proc

    @property
    def outstanding(self) -> int:
        return int(self.board.rows[self._row])

    @outstanding.setter
    def outstanding(self, value: int) -> None:
        self.board.rows[self._row] = value

    @property
    def routed(self) -> int:
        return int(self.board.rows[self._row + 1])

    @routed.setter
    def routed(self, value: int) -> None:
        self.board.rows[self._row + 1] = value


class FleetView:
    """Every replica as worker `worker` sees it; `counts()` sums the workers' rows for /metrics."""

    def __init__(self, board: Board, worker: int, base_urls: list[str]) -> None:
        self.board = board
        self.replicas = [ReplicaView(board, worker, i, url) for i, url in enumerate(base_urls)]

    def counts(self) -> list[ReplicaCounts]:
        rows = []
        for r in self.replicas:
            outstanding, routed = self.board.replica_totals(r.index)
            rows.append(ReplicaCounts(r.index, routed, outstanding, r.restarts, r.phase == RPhase.READY))
        return rows
