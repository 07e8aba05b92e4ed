"""A client that leaves mid-request: the front drops its engine request (the engine sees its connection
close) and its in-flight count returns to 0. Real uvicorn, real sockets, a stand-in engine that
records when its connection closes; the real-vLLM version is tests/integration/test_disconnect.py.

Each case runs twice: on plain uvicorn (the gate's watcher task hears the disconnect), and on the
front's own connections (serve/connections.py: the connection's Departure tells the gate, no task).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time

import pytest
import uvicorn
from aiohttp import web

from neuronserve.front.app import create_app
from neuronserve.front.gate import Gate
from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.proxy import make_client
from neuronserve.front.state import Phase, ServerState
from neuronserve.serve import listener
from neuronserve.serve.connections import ConnectionLimits
from neuronserve.types import ServeOptions

pytestmark = pytest.mark.integration  # the front served by uvicorn on a real socket


SERVERS = ["uvicorn", "front"]


async def _scenario(stream: bool, server_kind: str) -> tuple[float, int, str]:
    closed = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await request.read()
        if stream:
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b'data: {"x": 1}\n\n')
        for _ in range(600):  # 30 s: an answer nobody should wait for
            if request.transport is None or request.transport.is_closing():
                closed.set()
                break
            await asyncio.sleep(0.05)
        return web.json_response({"late": True}) if not stream else resp

    engine = web.Application()
    engine.router.add_post("/v1/completions", slow)
    runner = web.AppRunner(engine)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    state = ServerState()
    state.move(Phase.LOADING)
    state.set_engine_health(True)
    state.move(Phase.READY)
    opts = ServeOptions()
    client = make_client(f"http://127.0.0.1:{port}", 60.0, 0)
    holder: list[Gate] = []
    metrics = FrontMetrics(state, lambda: holder[0].in_flight, {})
    app = create_app(state, opts, client, metrics=metrics)
    gate = Gate(app, state, 0, metrics=metrics)
    holder.append(gate)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    front_port = sock.getsockname()[1]
    if server_kind == "front":
        config = listener.uvicorn_config(gate, opts, ConnectionLimits())
    else:
        config = uvicorn.Config(gate, lifespan="off", log_config=None, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", front_port)
        body = json.dumps({"prompt": "x", "stream": True} if stream else {"prompt": "x"}).encode()
        writer.write(
            b"POST /invocations HTTP/1.1\r\nHost: f\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        while gate.in_flight == 0:
            await asyncio.sleep(0.01)
        if stream:
            await reader.readuntil(b"data:")  # the stream has started
        else:
            await asyncio.sleep(0.3)  # the engine holds the request
        t0 = time.monotonic()
        writer.transport.abort()  # the client vanishes (RST)
        await asyncio.wait_for(closed.wait(), 10)
        took = time.monotonic() - t0
        for _ in range(200):
            if gate.in_flight == 0:
                break
            await asyncio.sleep(0.01)
        return took, gate.in_flight, metrics.render().decode()
    finally:
        server.should_exit = True
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 5)
        await client.aclose()
        await runner.cleanup()


@pytest.mark.parametrize("server_kind", SERVERS)
def test_plain_request_is_dropped_at_the_engine_when_the_client_leaves(server_kind: str) -> None:
    took, in_flight, text = asyncio.run(_scenario(stream=False, server_kind=server_kind))
    assert took < 2.0 and in_flight == 0
    assert 'neuronserve_requests_total{route="/invocations",schema="completion",status="499"} 1.0' in text


@pytest.mark.parametrize("server_kind", SERVERS)
def test_stream_is_dropped_at_the_engine_when_the_client_leaves(server_kind: str) -> None:
    took, in_flight, _ = asyncio.run(_scenario(stream=True, server_kind=server_kind))
    assert took < 2.0 and in_flight == 0
