"""A stand-in engine in the test's own event loop: a real aiohttp server on a free 127.0.0.1 port that
answers every method and path with one handler, for the front's engine client to talk HTTP to."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def engine(handler: Handler) -> AsyncIterator[str]:
    """The server's base URL while the block runs; stopped after it."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
