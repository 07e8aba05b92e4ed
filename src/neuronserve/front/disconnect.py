"""Cancel a request's work when its client goes away, so the engine aborts the generation.

Why: a client that gives up (a timeout, a closed browser tab, SageMaker's 60 s limit) otherwise
leaves the engine generating a whole answer nobody reads, holding a batch slot and KV cache; under
load that turns one impatient client into queueing for everyone. Streams were already covered by
Starlette (it stops the body when the client leaves); a plain request was not: its handler waits on
the engine and never looks at the client.

How: once the request body is read, the only message the server can still deliver is
`http.disconnect`. A watcher waits for it and cancels the handler's task; the cancellation reaches
the aiohttp call to the engine, which closes that connection, and vLLM aborts a request whose
connection closed (its `with_cancellation` wrapper on the generation routes). The handler's own
later `receive()` calls (Starlette's disconnect listener) are answered from the same watcher, so
the ASGI `receive` is never awaited twice at once. One task per request that has a body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

CLIENT_CLOSED = 499  # nginx's "client closed request": the status logged and counted for these


async def run_cancelling_on_disconnect(
    app: ASGIApp, scope: MutableMapping[str, Any], receive: Receive, send: Send
) -> bool:
    """Run `app`; True when the client went away first and the app was cancelled because of it."""
    task = asyncio.current_task()
    assert task is not None
    gone = asyncio.Event()
    finished = False  # the whole response is sent: nothing left to cancel
    cancelled = False
    watcher: asyncio.Task[None] | None = None

    async def watch() -> None:
        nonlocal cancelled
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        if not finished:
            cancelled = True
            task.cancel()

    async def receive_wrapped() -> Message:
        nonlocal watcher
        if watcher is not None:  # the body is read: only a disconnect can come, from the watcher
            await gone.wait()
            return {"type": "http.disconnect"}
        message = await receive()
        if message["type"] == "http.request" and not message.get("more_body", False):
            watcher = asyncio.ensure_future(watch())
        return message

    async def send_wrapped(message: Message) -> None:
        nonlocal finished
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            finished = True
        await send(message)

    try:
        await app(scope, receive_wrapped, send_wrapped)
    except asyncio.CancelledError:
        if cancelled and task.uncancel() == 0:
            return True
        raise
    finally:
        if watcher is not None:
            watcher.cancel()
    return False
