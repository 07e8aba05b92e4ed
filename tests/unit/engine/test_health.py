"""Each replica's cached health (engine/health.py), against real stand-in engines on 127.0.0.1 whose
/health answer the test changes, over a pool of real sleeping processes: LOADING becomes READY on the
first 200, a READY replica tracks its health, and only repeated silence counts against a live one."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web
from tests.support.replicas import make_plan

from neuronserve.engine import health
from neuronserve.engine.pool import ReplicaPool, RPhase

FAST = {"HEALTH_EVERY_S": 0.02, "HEALTH_TIMEOUT_S": 0.2}


class StandIn:
    """One engine's /health: "ok" 200, "loading" 503, "silent" never answers in time."""

    def __init__(self) -> None:
        self.mode = "loading"
        self.asked = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.asked += 1
        if self.mode == "silent":
            await asyncio.sleep(1.0)
        return web.Response(status=200 if self.mode == "ok" else 503)


@asynccontextmanager
async def listening(engine: StandIn) -> AsyncIterator[int]:
    app = web.Application()
    app.router.add_get("/health", engine.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAST.items():
        monkeypatch.setattr(health, name, value)


def test_replicas_follow_their_health(tmp_path: Path, fast: None) -> None:
    engines = [StandIn(), StandIn()]

    async def run() -> list[str]:
        seen: list[str] = []
        async with AsyncExitStack() as stack:
            ports = [await stack.enter_async_context(listening(e)) for e in engines]
            plan = make_plan(2, str(tmp_path))
            specs = tuple(replace(s, port=p) for s, p in zip(plan.replicas, ports, strict=True))
            plan = replace(plan, replicas=specs)
            pool = ReplicaPool(plan, {"PATH": os.environ.get("PATH", "")})
            pool.start_initial(compile_first=False)
            watcher = asyncio.create_task(health.watch(pool))
            first, second = pool.replicas
            try:
                await until(lambda: engines[0].asked >= 3 and engines[1].asked >= 3)
                seen.append(f"{first.phase} {second.phase}")  # both still loading (503)
                engines[0].mode = "ok"
                await until(lambda: first.phase == RPhase.READY)
                seen.append(f"{first.phase} {first.healthy} {second.phase}")
                engines[0].mode = "loading"  # a READY replica answering 503: unhealthy, still READY
                await until(lambda: not first.healthy)
                seen.append(f"{first.phase} {first.healthy}")
                engines[0].mode = "ok"
                await until(lambda: first.healthy)
                engines[0].mode = "silent"  # one or two timeouts of a live process are tolerated
                asked = engines[0].asked
                await until(lambda: engines[0].asked >= asked + 2)
                await asyncio.sleep(0.05)
                tolerated = first.healthy
                await until(lambda: not first.healthy)  # the third in a row is not
                seen.append(f"tolerated {tolerated}, then {first.healthy}")
            finally:
                watcher.cancel()
                pool.stop_all(grace_s=1)
        return seen

    assert asyncio.run(run()) == [
        "LOADING LOADING",
        "READY True LOADING",
        "READY False",
        "tolerated True, then False",
    ]


def test_a_refused_connection_is_unhealthy_at_once(tmp_path: Path, fast: None) -> None:
    engine = StandIn()
    engine.mode = "ok"

    async def run() -> tuple[bool, bool]:
        async with listening(engine) as port:
            plan = make_plan(1, str(tmp_path))
            plan = replace(plan, replicas=(replace(plan.replicas[0], port=port),))
            pool = ReplicaPool(plan, {"PATH": os.environ.get("PATH", "")})
            pool.start_initial(compile_first=False)
            watcher = asyncio.create_task(health.watch(pool))
            replica = pool.replicas[0]
            try:
                await until(lambda: replica.phase == RPhase.READY and replica.healthy)
                before = replica.healthy
            except BaseException:
                watcher.cancel()
                pool.stop_all(grace_s=1)
                raise
        try:  # the stand-in is gone: its port refuses connections
            await until(lambda: not replica.healthy)
            return before, replica.healthy
        finally:
            watcher.cancel()
            pool.stop_all(grace_s=1)

    assert asyncio.run(run()) == (True, False)
