"""A real uvicorn on a free 127.0.0.1 port for the duration of an `async with`, for the tests that drive
the front's connection protocol (serve/connections.py) with raw sockets."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import uvicorn


@contextlib.asynccontextmanager
async def serving(config: uvicorn.Config, *, sndbuf: int = 0) -> AsyncIterator[int]:
    """Serve `config` and yield the port; `sndbuf`: the accepted sockets' send buffer (Linux gives
    them the listening socket's), so that a client that reads slowly fills it soon."""
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
