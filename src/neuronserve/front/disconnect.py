"""Cancel a request's work when its client goes away, so the engine aborts the generation.

Why: a client that gives up (a timeout, a closed browser tab, SageMaker's 60 s limit) otherwise
leaves the engine generating a whole answer nobody reads, holding a batch slot and KV cache; under
load that turns one impatient client into queueing for everyone. Streams were already covered by
Starlette (it stops the body when the client leaves); a plain request was not: its handler waits on
the engine and never looks at the client.

How: once the request body is read, the only message the server can still deliver is
`http.disconnect`. A watcher waits for it and cancels the handler's task; the cancellation reaches
the call to the engine (front/enginepool.py), which closes that connection, and vLLM aborts a request
whose connection closed (its `with_cancellation` wrapper on the generation routes). The handler's own
later `receive()` calls are answered from the same watcher, so the ASGI `receive` is never awaited
twice at once. One task per request that has a body; when the gate has read the whole body already,
it starts with the request (a stream's chunks are sent without any listener of their own:
front/streaming.py).

Under the front's own connections (serve/connections.py) there is no watcher task: the connection
puts a `Departure` in each request's scope (DEPARTURE_KEY) and fires it from `connection_lost`, the
moment uvicorn would deliver `http.disconnect`; the gate's request registers its cancel there
(`run_cancelling_on_departure`). Same outcome, without a task, its wake-ups and its cancel per
request (the watcher task was about 10 µs of a request's CPU: docs/PERFORMANCE.md, "A request path in
one piece, measured"). Other servers (tests' in-process transports, the benchmarks' relays) give no
Departure, and get the watcher.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

CLIENT_CLOSED = 499  # nginx's "client closed request": the status logged and counted for these
DEPARTURE_KEY = "neuronserve.departure"  # the connection's Departure, in the scope of each request on it


class Departure:
    """One client connection's going away, told to whoever waits on it (no task, no future): made
    by the connection, fired from its `connection_lost`; a callback added after that runs at once."""

    __slots__ = ("_callbacks", "gone")

    def __init__(self) -> None:
        self.gone = False
        self._callbacks: list[Callable[[], None]] = []

    def on_gone(self, callback: Callable[[], None]) -> None:
        if self.gone:
            callback()
        else:
            self._callbacks.append(callback)

    def forget(self, callback: Callable[[], None]) -> None:
        if callback in self._callbacks:  # (not when fired already)
            self._callbacks.remove(callback)

    def fire(self) -> None:
        self.gone = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


class Sent(Protocol):
    """What the caller's own `send` wrapper knows: whether the last body message went out."""

    @property
    def complete(self) -> bool: ...


class CancelOnLeave:
    """The one rule of both ways a request hears its client leave (the watcher task, the
    connection's Departure): called when the client goes, it cancels `task` unless
    the answer is complete (`sent`) or it cancelled already; after a CancelledError, `caused` says
    whether that was this cancel alone (one from elsewhere is not the caller's to swallow)."""

    __slots__ = ("cancelled", "sent", "task")

    def __init__(self, task: asyncio.Task[Any], sent: Sent) -> None:
        self.task = task
        self.sent = sent
        self.cancelled = False

    def __call__(self) -> None:
        if not self.sent.complete and not self.cancelled:
            self.cancelled = True
            self.task.cancel()

    def caused(self) -> bool:
        return self.cancelled and self.task.uncancel() == 0


class _Tracked:
    """`send`, noting the end of the response (when the caller does not note it itself)."""

    def __init__(self, send: Send) -> None:
        self.out = send
        self.complete = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self.out(message)


async def run_cancelling_on_disconnect(
    app: ASGIApp,
    scope: MutableMapping[str, Any],
    receive: Receive,
    send: Send,
    *,
    body: Message | None = None,
    sent: Sent | None = None,
    task: asyncio.Task[Any] | None = None,
) -> bool:
    """Run `app`; True when the client went away first and the app was cancelled because of it.

    `body`: the request's body message, already read by the caller: the app's first receive() gets
    it, and when it is the whole body the watcher starts at once. `sent`: the caller's `send` notes
    the response's end itself (the gate's does), so `send` is not wrapped again. `task`: the
    current task, when the caller has it (asyncio.current_task looks up the loop again)."""
    if task is None:
        task = asyncio.current_task()
        assert task is not None
    if sent is None:
        tracked = _Tracked(send)
        sent, send = tracked, tracked.send
    loop = task.get_loop()
    gone: asyncio.Future[None] | None = None  # made when the app waits on the disconnect
    leave = CancelOnLeave(task, sent)
    watcher: asyncio.Task[None] | None = None
    pending = body

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        if gone is not None and not gone.done():
            gone.set_result(None)
        leave()

    async def receive_wrapped() -> Message:
        nonlocal watcher, pending, gone
        if pending is not None:
            message, pending = pending, None
            return message
        if watcher is not None:  # the body is read: only a disconnect can come, from the watcher
            if watcher.done():
                return {"type": "http.disconnect"}
            if gone is None:
                gone = loop.create_future()
            await gone
            return {"type": "http.disconnect"}
        message = await receive()
        if message["type"] == "http.request" and not message.get("more_body", False):
            watcher = loop.create_task(watch())
        return message

    if pending is not None and not pending.get("more_body", False):
        watcher = loop.create_task(watch())
    try:
        await app(scope, receive_wrapped, send)
    except asyncio.CancelledError:
        if leave.caused():
            return True
        raise
    finally:
        if watcher is not None:
            watcher.cancel()
    return False


async def run_cancelling_on_departure(
    app: ASGIApp,
    scope: MutableMapping[str, Any],
    receive: Receive,
    send: Send,
    *,
    body: Message,
    sent: Sent,
    task: asyncio.Task[Any],
    departure: Departure,
) -> bool:
    """run_cancelling_on_disconnect's outcome told by the connection's `departure` instead of a
    watcher task: True when the client went away before the response's end and the app was
    cancelled because of it. `body` is the whole body, already read: the app's first receive() gets
    it, later ones go to the server's receive (only `http.disconnect` can come)."""
    leave = CancelOnLeave(task, sent)
    pending: Message | None = body

    async def receive_after_body() -> Message:
        nonlocal pending
        if pending is not None:
            message, pending = pending, None
            return message
        return await receive()

    departure.on_gone(leave)
    try:
        await app(scope, receive_after_body, send)
    except asyncio.CancelledError:
        if leave.caused():
            return True
        raise
    finally:
        departure.forget(leave)
    return False
