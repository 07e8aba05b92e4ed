"""Pure-ASGI gate in front of every route but /ping and /metrics: route allowlist, phase check,
body read (bounded in time and size), concurrency limit, in-flight count (for draining), the front's
request metrics, request ids and the one log line per request (those two written by
front/requestrecord.py).

Why pure ASGI (not BaseHTTPMiddleware): it adds no task per request, so streamed responses flow
through untouched and the gate costs microseconds.

Why the body is read before the slot is taken: a concurrency slot stands for engine work. Counted
before its body arrived, 256 clients sending one body byte each held every slot, and everyone else got
429 for as long as they cared to wait. The gate reads the body first (up to the payload limit, within
NEURONSERVE_BODY_TIMEOUT_S, else 408 and the connection closed), then takes the slot and replays the
body to the app as one message. A body over the limit is handed over unfinished: the app refuses it
(413, in the route's own error shape) from its first bytes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from neuronserve.front import routes
from neuronserve.front.disconnect import (
    CLIENT_CLOSED,
    DEPARTURE_KEY,
    run_cancelling_on_departure,
    run_cancelling_on_disconnect,
)
from neuronserve.front.errors import FrontError, NotFound, NotReady, Overloaded, error_bytes
from neuronserve.front.limiter import Limiter
from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.request_cost import CHARGE_KEY, Charge
from neuronserve.front.requestid import REQUEST_ID_KEY, request_id  # the handlers import both from here
from neuronserve.front.requestrecord import RequestRecord
from neuronserve.front.routes import UNGATED
from neuronserve.front.state import Phase, ServerState

__all__ = [
    "BODY_KEY",
    "REQUEST_ID_KEY",
    "Gate",
    "declared_over",
    "request_id",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

BODY_KEY = "neuronserve.body"  # the whole body the gate read (handlers.body_of), when it is whole
BODY_TIMEOUT_S = 30.0  # NEURONSERVE_BODY_TIMEOUT_S's default
MAX_BODY_BYTES = 6 * 1024 * 1024  # SAGEMAKER_MAX_PAYLOAD_IN_MB's default


class _Exchange:
    """One admitted request's answer on its way out: the id echoed, its status, first body byte and end
    noted (one wrapper around `send`, on every message of a stream)."""

    __slots__ = ("complete", "first_byte", "out", "rid", "status")

    def __init__(self, out: Send, rid: bytes) -> None:
        self.out = out
        self.rid = rid
        self.status = 0
        self.first_byte: float | None = None
        self.complete = False  # the last body message is sent: nothing left to cancel

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.body":
            more = message.get("more_body", False)
            if self.first_byte is None and (message.get("body") or not more):
                self.first_byte = time.perf_counter()
            if not more:
                self.complete = True
        elif kind == "http.response.start":
            self.status = message["status"]
            headers = [h for h in message.get("headers", ()) if h[0].lower() != b"x-request-id"]
            message["headers"] = [*headers, (b"x-request-id", self.rid)]
        await self.out(message)


class Gate:
    def __init__(
        self,
        app: ASGIApp,
        state: ServerState,
        max_concurrency: int,
        *,
        metrics: FrontMetrics | None = None,
        expose_engine_routes: bool = False,
        body_timeout_s: float = BODY_TIMEOUT_S,
        max_body_bytes: int = MAX_BODY_BYTES,
        limiter: Limiter | None = None,
    ) -> None:
        """`limiter`: the concurrency count (front/limiter.py), shared by the front's workers when
        there are several; by default this process's own, limited to `max_concurrency`."""
        self.app = app
        self.state = state
        self.max_concurrency = max_concurrency
        self.limiter = limiter if limiter is not None else Limiter(max_concurrency)
        self.metrics = metrics
        self.record = RequestRecord(metrics)  # the request metrics and the access line
        self.expose_engine_routes = expose_engine_routes
        self.body_timeout_s = body_timeout_s
        self.max_body_bytes = max_body_bytes

    @property
    def in_flight(self) -> int:
        """The sequences in flight: this process's, or the container's (front/limiter.py)."""
        return self.limiter.in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in UNGATED:
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        request_id(scope)  # decided (and a refused id warned about) once, before any answer
        if not routes.is_allowed(path, self.expose_engine_routes):
            await self._refuse(scope, send, start, NotFound(routes.refusal(path)), reason="not_found")
            return
        if self.state.phase != Phase.READY:
            await self._not_ready(scope, send, start)
            return
        task = asyncio.current_task(asyncio.get_running_loop())  # given the loop: one look-up, not two
        assert task is not None
        body = await self._read_body(scope, receive, send, start, task=task)
        if body is None:  # refused or gone: answered and logged
            return
        if self.state.phase != Phase.READY:  # the drain began while the body arrived
            await self._not_ready(scope, send, start)
            return
        if not self.limiter.try_acquire(1):
            message = f"too many requests in flight (limit {self.max_concurrency}); retry later"
            await self._refuse(scope, send, start, Overloaded(message), reason="limit")
            return
        if self.state.phase != Phase.READY:  # another front process began the drain meanwhile
            self.limiter.release(1)
            await self._not_ready(scope, send, start)
            return
        await self._run(scope, body, receive, send, start, task=task)

    async def _run(
        self,
        scope: Scope,
        body: Message,
        receive: Receive,
        send: Send,
        start: float,
        *,
        task: asyncio.Task[Any],
    ) -> None:
        """The admitted request (its weight 1 already taken): in flight, its body handed over (in the
        scope too when whole: handlers.body_of), its id echoed, measured and logged."""
        exchange = _Exchange(send, request_id(scope).encode("latin-1"))  # the safe set: always latin-1
        charge = scope[CHARGE_KEY] = Charge(self)  # weight 1 now, the request's sequences once parsed
        if not body["more_body"]:
            scope[BODY_KEY] = body["body"]
        gone = False
        departure = None if body["more_body"] else scope.get(DEPARTURE_KEY)
        try:
            if departure is not None:  # the front's own connection tells of the client's going
                gone = await run_cancelling_on_departure(
                    self.app,
                    scope,
                    receive,
                    exchange.send,
                    body=body,
                    sent=exchange,
                    task=task,
                    departure=departure,
                )
            else:
                gone = await run_cancelling_on_disconnect(
                    self.app, scope, receive, exchange.send, body=body, sent=exchange, task=task
                )
        finally:
            self.finish(scope, charge, CLIENT_CLOSED if gone else exchange.status, start, exchange.first_byte)

    def finish(
        self, scope: Scope, charge: Charge, status: int, start: float, first_byte: float | None
    ) -> None:
        """An admitted request is over: its slots back, then measured and logged with its status (none
        written: 500, as uvicorn answers)."""
        self.limiter.release(charge.weight)
        code = status or 500
        self.record.measure(scope, scope.get("path", ""), code, start, first_byte)
        self.record.log(scope, code, start)

    def refused_over_limit(self) -> None:
        """A request refused when its sequences did not fit (work.Charge): counted as the limit's."""
        if self.metrics is not None:
            self.metrics.reject("limit")

    async def _not_ready(self, scope: Scope, send: Send, start: float) -> None:
        phase = self.state.phase
        draining = phase == Phase.DRAINING
        why = "draining" if draining else "not ready"
        reason = "draining" if draining else "not_ready"
        refusal = NotReady(f"server is {why} (phase {phase}); retry later")
        await self._refuse(scope, send, start, refusal, reason=reason)

    async def _read_body(
        self, scope: Scope, receive: Receive, send: Send, start: float, *, task: asyncio.Task[Any]
    ) -> Message | None:
        """The whole body as ONE http.request message, or its first part (over max_body_bytes, with
        more_body set: the app refuses it); None when the client was too slow (408, connection closed)
        or went away (499), both answered and logged here. A body whose declared length is already
        over the limit is not read at all: the app answers 413 from the header at once, rather than
        after the limit's bytes arrived (or a 408), and an `Expect: 100-continue` client is never told
        to send it (uvicorn sends "100 Continue" on the first receive()).

        One deadline for the whole body (not per chunk): a client trickling a byte a second would pass
        any per-chunk timeout. The hot path (a small body already in uvicorn's buffer) costs one
        receive() and the deadline's timer handle."""
        if declared_over(scope, self.max_body_bytes):
            return {"type": "http.request", "body": b"", "more_body": True}
        parts: list[bytes] = []
        size = 0
        more = True
        late = False

        def expire() -> None:
            nonlocal late
            late = True
            task.cancel()

        # a bare timer, not asyncio.timeout(): this runs on every request and costs a third as much
        deadline = task.get_loop().call_later(self.body_timeout_s, expire)
        try:
            while more and size <= self.max_body_bytes:
                message = await receive()
                if message["type"] != "http.request":  # http.disconnect: nobody to answer
                    self.record.log(scope, CLIENT_CLOSED, start)
                    return None
                chunk = message.get("body", b"")
                if chunk:
                    parts.append(chunk)
                    size += len(chunk)
                more = message.get("more_body", False)
        except asyncio.CancelledError:
            if not late or task.uncancel() > 0:  # cancelled for another reason: not ours to swallow
                raise
            await self._too_slow(scope, send, start)
            return None
        finally:
            deadline.cancel()
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        return {"type": "http.request", "body": body, "more_body": more}

    async def _too_slow(self, scope: Scope, send: Send, start: float) -> None:
        message = (
            f"the request body did not arrive within {self.body_timeout_s:g} s "
            "(NEURONSERVE_BODY_TIMEOUT_S); the connection is closed"
        )
        await _reject(send, 408, message, request_id(scope).encode("latin-1"), close=True)
        self.record.refused(scope, 408, start, "bad_request")
        self.record.log(scope, 408, start)

    async def _refuse(self, scope: Scope, send: Send, start: float, err: FrontError, *, reason: str) -> None:
        status = err.status
        await _reject(send, status, err.message, request_id(scope).encode("latin-1"))
        self.record.refused(scope, status, start, reason)
        self.record.log(scope, status, start)


def declared_over(scope: Scope, limit: int) -> bool:
    """Whether the request's Content-Length declares more than `limit` bytes (bytes.isdigit is
    ASCII digits only; the parser has already refused a malformed length)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return bool(value.isdigit()) and int(value) > limit
    return False


async def _reject(send: Send, status: int, message: str, rid: bytes, *, close: bool = False) -> None:
    body = error_bytes(status, message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-request-id", rid),
    ]
    if status in (429, 503):
        headers.append((b"retry-after", b"1"))
    if close:  # uvicorn closes the connection after this response: the rest of the body is never read
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
