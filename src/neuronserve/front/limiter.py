"""The concurrency limit's count (NEURONSERVE_MAX_CONCURRENCY, in sequences: request_cost.py).

The gate and a request's Charge take and give back weight only through `try_acquire` / `release`, so
the count can live elsewhere than in this process: one front process keeps it in a plain integer
(here); several front workers share one count (serve/'s worker processes back the same two calls with
shared memory), so the documented limit holds for the container as a whole.
"""

from __future__ import annotations


class Limiter:
    """Weights in flight against `limit` (0: no limit, only counted)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def try_acquire(self, weight: int) -> bool:
        """Take `weight` when it fits under the limit (True), else take nothing (False)."""
        if self.limit and self.count + weight > self.limit:
            return False
        self.count += weight
        return True

    def release(self, weight: int) -> None:
        self.count -= weight

    @property
    def in_flight(self) -> int:
        """The weight taken now (the whole container's, when the count is shared)."""
        return self.count
