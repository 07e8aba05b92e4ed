"""The real front (app + gate + metrics) in process, in front of a recording stand-in engine.

The stand-in is a real HTTP server on 127.0.0.1 that answers 200 to any method and path and
records what reached it: the tests under it check what the FRONT forwards or refuses, so the
engine's behaviour is not what is being tested. Starting a vLLM for a routing check would cost a
minute; the integration tests repeat the important checks on the real engine.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
from aiohttp import web

from neuronserve.front.app import create_app
from neuronserve.front.gate import Gate
from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.proxy import make_client
from neuronserve.front.state import Phase, ServerState
from neuronserve.types import ServeOptions


@dataclass
class Front:
    client: httpx.AsyncClient
    state: ServerState
    gate: Gate
    metrics: FrontMetrics
    seen: list[tuple[str, str]] = field(default_factory=list)  # (method, raw path) the engine got
    ids: list[str] = field(default_factory=list)  # the X-Request-Id of each request the engine got


@contextlib.asynccontextmanager
async def running_front(*, ready: bool = True, **opts: object) -> AsyncIterator[Front]:
    seen: list[tuple[str, str]] = []
    ids: list[str] = []

    async def anything(request: web.Request) -> web.Response:
        seen.append((request.method, request.raw_path))
        ids.append(request.headers.get("x-request-id", ""))
        if request.path == "/metrics":
            return web.Response(text="vllm:num_requests_running 0.0\n", content_type="text/plain")
        return web.json_response({"engine": request.path})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", anything)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    serve = ServeOptions(**opts)  # type: ignore[arg-type]
    state = ServerState()
    engine = make_client(f"http://127.0.0.1:{port}", 10.0, 0)
    holder: list[Gate] = []
    metrics = FrontMetrics(state, lambda: holder[0].in_flight, {"version": "test"})
    gate = Gate(
        create_app(state, serve, engine, metrics=metrics),
        state,
        serve.max_concurrency,
        metrics=metrics,
        expose_engine_routes=serve.expose_engine_routes,
        max_body_bytes=int(serve.max_payload_mb * 1024 * 1024),  # as the server's lifecycle does
    )
    holder.append(gate)
    if ready:
        state.move(Phase.LOADING)
        state.set_engine_health(True)
        state.move(Phase.READY)
    transport = httpx.ASGITransport(app=gate)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://front") as client:
            yield Front(client, state, gate, metrics, seen, ids)
    finally:
        await engine.aclose()
        await runner.cleanup()
