"""The concurrency limit's count: what the gate and the sequence charge ask before work is admitted.

Why an interface of its own: with one front process the count is an integer on the event loop; with
several (NEURONSERVE_FRONT_WORKERS) NEURONSERVE_MAX_CONCURRENCY holds for the container as a whole,
so the count lives in shared memory (front/board.py). Both answer the same four questions:
`try_acquire(weight)` (admit `weight` sequences if they fit), `release(weight)`, `in_flight` (the
container's sequences in flight now) and `wait_idle()` (the drain's "nothing in flight"); the
shared count is a Limiter too, so whatever takes a Limiter takes either.

Why shared, not split: a split (the limit / N per worker) refuses early whenever SO_REUSEPORT's hash
gives one worker more long requests than its share, and a request heavier than limit / N could never
run. The shared count admits exactly what one process would: each worker adds to its own slot, and a
check-and-add holds a lock (fcntl.lockf on the shared memory's file, about 2 us for the pair; the
kernel releases it when a holder dies, so a killed worker never wedges the others). Releasing needs
no lock: a worker is its slot's only writer, and a sum read meanwhile can only be too high (refusing a
moment early, never admitting past the limit).
"""

from __future__ import annotations

import asyncio

from neuronserve.front.board import Board

IDLE_POLL_S = 0.05  # how often the drain looks at the shared count


class Limiter:
    """One front process: the count is this process's own (`limit` 0: no limit, only counted)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self.idle = asyncio.Event()
        self.idle.set()

    @property
    def in_flight(self) -> int:
        """The weight taken now (the whole container's, when the count is shared)."""
        return self.count

    def try_acquire(self, weight: int) -> bool:
        """Take `weight` when it fits under the limit (True), else take nothing (False)."""
        if self.limit and self.count + weight > self.limit:
            return False
        self.count += weight
        self.idle.clear()
        return True

    def release(self, weight: int) -> None:
        self.count -= weight
        if self.count <= 0:
            self.idle.set()

    async def wait_idle(self) -> None:
        """Until nothing is in flight (the drain)."""
        await self.idle.wait()


class SharedLimiter(Limiter):
    """Several front processes: worker `worker`'s view of the container's count (the supervisor's
    view, `worker=None`, only reads it and waits for it to fall to 0)."""

    def __init__(self, board: Board, worker: int | None, limit: int) -> None:
        super().__init__(limit)
        self.board = board
        self.worker = worker
        self._slots = board.flight  # one signed 64-bit count per worker

    @property
    def in_flight(self) -> int:
        return sum(self._slots)

    def try_acquire(self, weight: int) -> bool:
        me = self._me()
        if not self.limit:
            self._slots[me] += weight
            return True
        with self.board.flight_lock:
            if sum(self._slots) + weight > self.limit:
                return False
            self._slots[me] += weight
        return True

    def release(self, weight: int) -> None:
        self._slots[self._me()] -= weight

    def locked_total(self) -> int:
        """The count read under the lock: after a phase change, every admission either came before
        this read (and is counted) or comes after it (and sees the new phase: the gate re-checks it)."""
        with self.board.flight_lock:
            return sum(self._slots)

    async def wait_idle(self) -> None:
        while self.locked_total() > 0:
            await asyncio.sleep(IDLE_POLL_S)

    def _me(self) -> int:
        if self.worker is None:
            raise RuntimeError("the supervisor's view of the shared count admits nothing")
        return self.worker
