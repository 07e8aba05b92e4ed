"""Each replica's cached health, refreshed in the background so /ping and routing never wait on an engine.

A saturated engine may answer /health late; only repeated silence counts as unhealthy. A refused
connection means still loading (or gone: the process poll decides which).
"""

from __future__ import annotations

import asyncio
import logging

import httpx

from neuronserve.engine.pool import ReplicaPool, RPhase

log = logging.getLogger("neuronserve.engine")

HEALTH_EVERY_S = 0.5
HEALTH_TIMEOUT_S = 2.0
HEALTH_TIMEOUTS_TOLERATED = 3


async def watch(pool: ReplicaPool) -> None:
    """Runs until cancelled: LOADING replicas become READY on their first 200; READY ones track health."""
    timeouts = [0] * len(pool)
    async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S) as client:

        async def check(i: int) -> None:
            r = pool.replicas[i]
            try:
                resp = await client.get(f"{r.base_url}/health")
                ok = resp.status_code == 200
                timeouts[i] = 0
            except httpx.TimeoutException:
                timeouts[i] += 1
                ok = timeouts[i] < HEALTH_TIMEOUTS_TOLERATED and r.serving()
            except httpx.HTTPError:
                ok = False
            if r.phase == RPhase.LOADING and ok:
                pool.mark_ready(r)
            elif r.phase == RPhase.READY:
                if ok != r.healthy:
                    log.warning("replica %d health check %s", r.index, "passes again" if ok else "FAILS")
                r.healthy = ok

        while True:
            live = [i for i, r in enumerate(pool.replicas) if r.phase in (RPhase.LOADING, RPhase.READY)]
            await asyncio.gather(*(check(i) for i in live))
            await asyncio.sleep(HEALTH_EVERY_S)
