"""The garbage collector, set for a long-running server once its modules are imported.

Why: CPython's cyclic collector runs its oldest generation over every tracked object, and the front's
imports (FastAPI, pydantic, Starlette, aiohttp, prometheus_client, the plan) leave hundreds of
thousands of them, none ever freed. Each full collection then paused the event loop for tens of
milliseconds (36 ms measured here), which is /ping's p99 under load (docs/PERFORMANCE.md, "Front
ceiling"). `gc.freeze()` moves every object alive at start-up into a permanent generation the
collector skips (the gc module's documentation suggests it for this); requests allocate short-lived
objects that reference counting frees, so the young generation is also collected less often
(YOUNG_THRESHOLD allocations instead of 700).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def settle() -> None:
    """Collect once, freeze what is left, and collect the young generation less often."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
