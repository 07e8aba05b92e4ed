"""The real front (app + gate + metrics) in process, in front of a recording stand-in engine.

The stand-in is a real HTTP server on 127.0.0.1 that answers 200 to any method and path and
records what reached it (method and path in `seen`, JSON bodies in `bodies`): the tests under it
check what the FRONT forwards or refuses, so the engine's behaviour is not what is being tested. A test
may give `answers` (path -> the JSON the stand-in answers, from the request's body) and `listen=True`
to have the front also served by uvicorn on a real 127.0.0.1 port (`url`), for clients that open
their own connections (text_generation, aiohttp). Starting a vLLM for a routing check would cost a
minute; the integration tests repeat the important checks on the real engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import web

from neuronserve.front.app import create_app
from neuronserve.front.gate import Gate
from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.proxy import make_client
from neuronserve.front.sessions import SessionScope, SessionStore
from neuronserve.front.state import Phase, ServerState
from neuronserve.types import RequestSupport, ServeOptions

Answer = Callable[[dict[str, Any]], Any]
Stream = Callable[[dict[str, Any]], list[Any]]


@dataclass
class Front:
    client: httpx.AsyncClient
    state: ServerState
    gate: Gate
    metrics: FrontMetrics
    seen: list[tuple[str, str]] = field(default_factory=list)  # (method, raw path) the engine got
    bodies: list[Any] = field(default_factory=list)  # the JSON bodies the engine got, in order
    url: str = ""  # with listen=True: the front on a real port
    ids: list[str] = field(default_factory=list)  # the X-Request-Id of each request the engine got


class _OneReplica:
    """The session wrapper's view of a pool with one ready replica (sessions pin to index 0)."""

    index = 0

    def __init__(self) -> None:
        self.replicas = [self]

    def pick(self, _: object) -> _OneReplica:
        return self


@contextlib.asynccontextmanager
async def _listening(app: Any) -> AsyncIterator[str]:
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def running_front(
    *,
    ready: bool = True,
    engine_delay_s: float = 0.0,
    sessions: SessionStore | None = None,
    support: RequestSupport | None = None,
    answers: dict[str, Answer] | None = None,
    streams: dict[str, Stream] | None = None,
    listen: bool = False,
    **opts: object,
) -> AsyncIterator[Front]:
    """`engine_delay_s`: the stand-in engine holds every /v1/* answer that long (requests in flight).
    `sessions`: the sticky-session wrapper in front of the app, over this store. `support`: the
    plan's request support the app enforces. `answers`: path -> the stand-in's JSON answer to a body.
    `streams`: path -> the SSE events (each a JSON-able object, or the raw `[DONE]`) the stand-in
    streams for a body asking `stream`, one write each. `listen`: the front also on a real port
    (`Front.url`), for clients that need one."""
    seen: list[tuple[str, str]] = []
    bodies: list[Any] = []
    ids: list[str] = []

    async def anything(request: web.Request) -> web.Response:
        seen.append((request.method, request.raw_path))
        ids.append(request.headers.get("x-request-id", ""))
        raw = await request.read()
        body: Any = None
        with contextlib.suppress(ValueError):
            body = json.loads(raw) if raw else None
        bodies.append(body)
        if engine_delay_s and request.path.startswith("/v1/"):
            await asyncio.sleep(engine_delay_s)
        if request.path == "/metrics":
            return web.Response(text="vllm:num_requests_running 0.0\n", content_type="text/plain")
        if streams and request.path in streams and isinstance(body, dict) and body.get("stream"):
            resp = web.StreamResponse(headers={"content-type": "text/event-stream; charset=utf-8"})
            await resp.prepare(request)
            for event in streams[request.path](body):
                data = event if isinstance(event, str) else json.dumps(event)
                await resp.write(f"data: {data}\n\n".encode())
            await resp.write_eof()
            return resp
        if answers and request.path in answers:
            return web.json_response(answers[request.path](body if isinstance(body, dict) else {}))
        if request.method == "POST" and request.path == "/v1/completions":
            # a completion's shape, so the generate routes can answer (one choice per sequence)
            n = body.get("n") if isinstance(body, dict) else 1
            n = n if type(n) is int and 1 <= n <= 64 else 1
            choices = [{"index": i, "text": "ok", "finish_reason": "length"} for i in range(n)]
            usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
            return web.json_response({"engine": request.path, "choices": choices, "usage": usage})
        return web.json_response({"engine": request.path})

    standin = web.Application()
    standin.router.add_route("*", "/{tail:.*}", anything)
    runner = web.AppRunner(standin)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    serve = ServeOptions(**opts)  # type: ignore[arg-type]
    state = ServerState()
    engine = make_client(f"http://127.0.0.1:{port}", 10.0, 0)
    holder: list[Gate] = []
    metrics = FrontMetrics(state, lambda: holder[0].in_flight, {"version": "test"})
    app: Any = create_app(state, serve, engine, metrics=metrics, support=support)
    if sessions is not None:
        one = _OneReplica()
        app = SessionScope(app, sessions, one, one, int(serve.max_payload_mb * 1024 * 1024))  # type: ignore[arg-type]
    gate = Gate(
        app,
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
        async with contextlib.AsyncExitStack() as stack:
            url = await stack.enter_async_context(_listening(gate)) if listen else ""
            client = await stack.enter_async_context(
                httpx.AsyncClient(transport=transport, base_url="http://front")
            )
            yield Front(client, state, gate, metrics, seen, bodies, url, ids)
    finally:
        await engine.aclose()
        await runner.cleanup()
