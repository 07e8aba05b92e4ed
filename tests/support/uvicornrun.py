"""A real uvicorn with the front's connection protocol (serve/connections.py) on a free 127.0.0.1 port,
for the duration of an `async with`: for the tests that drive it with raw sockets."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from neuronserve.serve.connections import ConnectionLimits, protocol_class


@contextlib.asynccontextmanager
async def serving(app: Any, limits: ConnectionLimits | None = None, *, sndbuf: int = 0) -> AsyncIterator[int]:
    """Serve `app` behind the protocol with `limits` (the defaults when None) and yield the port;
    `sndbuf`: the accepted sockets' send buffer (Linux gives them the listening socket's), so that a
    client that reads slowly fills it soon."""
    config = uvicorn.Config(
        app,
        http=protocol_class(limits or ConnectionLimits()),
        lifespan="off",
        log_config=None,
        access_log=False,
    )
    sock = socket.socket()
    if sndbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        server.force_exit = True  # a stream a test left open does not hold the stop
        await asyncio.wait_for(task, 10)
