"""The fast path: a plain generate request served from the front's connection, without uvicorn's
request cycle or the ASGI layers between it and its handler.

Why: under load the front's CPU per non-streamed request was about twice the engine's (docs/
PERFORMANCE.md, "Below uvicorn, measured"): the same steps written as one piece on uvicorn cost
1.58-1.76 of the engine, below uvicorn 1.34-1.39. What lies between is uvicorn's cycle (its task
started at the head, an Event per request, the body copied into a bytearray and out again, each
answer message checked and written on its own) and the front's wrappers around `send` (the gate's,
the replica scope's, the worker tag's), each a coroutine and a message dict per message. Measured
with this path: 6-14 % less front CPU per non-streamed request, alternating on and off (docs/
PERFORMANCE.md, "The fast path"); the rest of the gap is the handler's own chain.

What it takes (serve/connections.py decides, in the parser's callbacks): a POST to `/invocations`,
`/generate` or `/` over HTTP/1.1 with a `Content-Length` within the payload limit, no
`Transfer-Encoding`, `Expect` or `Upgrade`, on a connection with no request in flight, while the
phase is READY; its whole body in the same read as the end of its head; no `stream` in the body
(streams are at their goal on the usual path); and a free concurrency slot. Anything else, including
a request that stops fitting at any of those points, is handed to uvicorn's cycle and the gate with
what was read so far, exactly as if the fast path did not exist: every refusal (408, 413, 429, 503)
and every stream is the gate's.

What it keeps, from the same objects the gate uses: the request id (decided once, echoed, sent to
the engine with its suffix), the limiter slot and the sequence charge (request_cost.Charge: a
request whose sequences do not fit gets the dialect's 429), the drain's in-flight count, the
cancel when the client leaves (the connection's Departure: 499 in the log and metrics), the replica
header and count (front/router.py), the request metrics and the access line, the handler itself
(the same guarded function HotRoutes calls: every answer and error in the route's dialect), and
uvicorn's default headers, status lines and header checks (the answer is the usual path's, byte for
byte: tests/integration/serve/test_fastpath.py). A response that is not one body (a stream from the
engine that the body did not announce) is written by an ASGI `send` here, chunked as uvicorn writes
it, with its flow control.

What it relies on of uvicorn (uvicorn/protocols/http/httptools_impl.py as installed here, 0.54.0;
a version that changes any of it fails the two test files named here): the protocol reads its
`cycle` in connection_lost (l. 116: sets `disconnected`, `message_event`), on_headers_complete
(l. 248: queues a pipelined request while `response_complete` is false), on_response_complete
(l. 327: starts the next one or arms the keep-alive timer) and shutdown (l. 349: clears
`keep_alive`); the head is written as
RequestResponseCycle.send writes it (l. 463: default headers first, names and values checked
against HEADER_RE / HEADER_VALUE_RE, lower-cased names, `connection: close` and chunked framing
added), which tests/unit/serve/test_fastpath.py checks against that very method for any headers.

NEURONSERVE_FAST_PATH=false turns it off (every request takes uvicorn's cycle and the gate).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE, STATUS_LINE

from neuronserve.front.disconnect import CLIENT_CLOSED, CancelOnLeave, Departure
from neuronserve.front.gate import BODY_KEY, Gate, request_id
from neuronserve.front.request_cost import CHARGE_KEY, Charge
from neuronserve.front.router import enter_route, leave_route, replica_tag
from neuronserve.front.state import Phase

log = logging.getLogger("neuronserve.front")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Handler = Callable[[Request], Awaitable[Response]]

PATHS = ("/invocations", "/generate", "/")  # POSTs that generate and answer in one body (routes.TABLE)
_REQUEST_ID = b"x-request-id"
_NAMES_KEPT = 256  # header names checked once and remembered (a handful in practice)


class _NoEvent:
    """uvicorn's protocol sets its cycle's `message_event` when the connection is lost; the fast
    path waits on the connection's Departure instead."""

    __slots__ = ()

    def set(self) -> None:
        pass


class Exchange:
    """One request on the fast path. It stands in uvicorn's `cycle` slot while it runs, with the
    attributes the protocol reads or sets there (response_complete, disconnected, keep_alive,
    message_event), so a pipelined request behind it waits in uvicorn's own queue and a shutdown
    closes the connection after its answer."""

    __slots__ = (
        "body",
        "chunked",
        "disconnected",
        "first_byte",
        "keep_alive",
        "left",
        "message_event",
        "response_complete",
        "scope",
        "start",
        "started",
        "status",
    )

    def __init__(self, scope: Scope, body: bytes, keep_alive: bool, start: float) -> None:
        self.scope = scope
        self.body = body
        self.keep_alive = keep_alive
        self.start = start
        self.response_complete = False
        self.disconnected = False
        self.message_event = _NoEvent()
        self.started = False  # the request's task ran (else its slot is given back by its callback)
        self.status = 0  # the answer's status once its head is written
        self.first_byte: float | None = None
        self.chunked = False
        self.left = 0  # a counted body's bytes still to come

    @property
    def complete(self) -> bool:
        """The answer is all written (disconnect.Sent: a client leaving now cancels nothing)."""
        return self.response_complete


class FastPath:
    """The fast path's shared part, one per front process: the gate whose state, limiter, metrics and
    access line it uses, the handlers of its routes, and the headers every answer carries last
    (the worker's tag, with several front workers)."""

    def __init__(
        self, gate: Gate, handlers: dict[str, Handler], tags: tuple[tuple[bytes, bytes], ...]
    ) -> None:
        self.gate = gate
        self.handlers = {path.encode(): handlers[path] for path in PATHS}
        self.tags = list(tags)
        self.max_body = gate.max_body_bytes
        self._names: set[bytes] = set()
        self.taken = 0  # requests served here since start (for the tests and a debugger)

    def open(self) -> bool:
        """Whether a new request may start here: READY (anything else is the gate's refusal)."""
        return self.gate.state.phase == Phase.READY

    def admit(self) -> bool:
        """A concurrency slot, taken before the request's task starts; False: the gate refuses it."""
        gate = self.gate
        if gate.state.phase != Phase.READY or not gate.limiter.try_acquire(1):
            return False
        if gate.state.phase != Phase.READY:  # another front process began the drain meanwhile
            gate.limiter.release(1)
            return False
        return True

    def unstarted(self, exchange: Exchange) -> None:
        """A task cancelled before it ran (a shutdown): its slot back."""
        if not exchange.started:
            self.gate.limiter.release(1)

    async def serve(self, conn: Connection, exchange: Exchange, departure: Departure) -> None:
        """The admitted request, from its handler to its access line (its slot already taken)."""
        exchange.started = True
        self.taken += 1
        gate = self.gate
        scope = exchange.scope
        task = asyncio.current_task()
        assert task is not None
        charge = scope[CHARGE_KEY] = Charge(gate)
        scope[BODY_KEY] = exchange.body
        route = enter_route()
        leave = CancelOnLeave(task, exchange)
        receive = _Receive(exchange, departure)
        departure.on_gone(leave)
        gone = False
        try:
            response = await self.handlers[scope["raw_path"]](Request(scope, receive))
            if isinstance(response, StreamingResponse) or response.background is not None:
                await response(scope, receive, lambda m: self.send(conn, exchange, route, m))
            else:
                self.write_whole(conn, exchange, route, response)
        except asyncio.CancelledError:
            if not leave.caused():
                raise
            gone = True
        except Exception as err:  # as uvicorn's cycle: logged; a 500 if nothing was written, else closed
            log.error("Exception in ASGI application (the fast path)", exc_info=err)
            if exchange.status == 0 and not exchange.disconnected:
                conn.write(_internal_error(conn.default_headers()))
                exchange.status = 500
            exchange.keep_alive = False
            conn.close()
        finally:
            departure.forget(leave)
            leave_route(route)
            gate.limiter.release(charge.weight)
            code = CLIENT_CLOSED if gone else (exchange.status or 500)
            gate._measure(scope, scope["path"], code, exchange.start, exchange.first_byte)
            gate._log(scope, code, exchange.start)
            conn.finished(exchange)

    def head(
        self,
        defaults: list[tuple[bytes, bytes]],
        exchange: Exchange,
        route: Any,
        status: int,
        headers: list[tuple[bytes, bytes]],
    ) -> bytes:
        """The answer's head as uvicorn's cycle writes it for the usual path's headers: its default
        headers, the app's (the request id replaced by the one decided), the replica's, the id, the
        tags; names checked and lower-cased, values checked, `connection: close` and chunked framing
        added as uvicorn adds them."""
        rid = request_id(exchange.scope).encode("latin-1")
        tag = replica_tag(route)
        last = [(_REQUEST_ID, rid), *self.tags] if tag is None else [tag, (_REQUEST_ID, rid), *self.tags]
        out = [STATUS_LINE[status]]
        close = counted = False
        values = []
        for given, value in (*defaults, *(h for h in headers if h[0].lower() != _REQUEST_ID), *last):
            name = given if given in self._names else self._checked(given)
            values.append(value)
            if name == b"content-length" and not counted:
                exchange.left = int(value.decode())
                counted = True
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                exchange.left = 0
                exchange.chunked = counted = True
            elif name == b"connection" and b"close" in [t.lower().strip() for t in value.split(b",")]:
                exchange.keep_alive = False
                close = True
            out += (name, b": ", value, b"\r\n")
        if HEADER_VALUE_RE.search(b"\t".join(values)):  # tab is the one control byte a value may hold
            raise RuntimeError("Invalid HTTP header value.")
        if not exchange.keep_alive and not close:
            out.append(b"connection: close\r\n")
        if not counted and status not in (204, 304):
            exchange.chunked = True
            out.append(b"transfer-encoding: chunked\r\n")
        out.append(b"\r\n")
        return b"".join(out)

    def _checked(self, name: bytes) -> bytes:
        """A header name as uvicorn writes it (checked, lower-cased); a valid lower-case one remembered."""
        if HEADER_RE.search(name):
            raise RuntimeError("Invalid HTTP header name.")
        lowered = name.lower()
        if lowered == name and len(self._names) < _NAMES_KEPT:
            self._names.add(name)
        return lowered

    def write_whole(self, conn: Connection, exchange: Exchange, route: Any, response: Response) -> None:
        """A one-body answer: head and body in one write."""
        body = bytes(response.body)
        head = self.head(conn.default_headers(), exchange, route, response.status_code, response.raw_headers)
        if exchange.chunked:
            data = head + (b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n")
        else:
            if len(body) != exchange.left:
                raise RuntimeError("Response content length does not match Content-Length")
            data = head + body
        exchange.status = response.status_code
        exchange.first_byte = time.perf_counter()
        exchange.response_complete = True
        conn.write(data)

    async def send(self, conn: Connection, exchange: Exchange, route: Any, message: Message) -> None:
        """An ASGI `send` for an answer in several messages, written as uvicorn's cycle writes it."""
        await conn.drained()
        if exchange.disconnected:
            return
        kind = message["type"]
        if exchange.status == 0:
            if kind != "http.response.start":
                raise RuntimeError(f"Expected ASGI message 'http.response.start', but got '{kind}'.")
            status = message["status"]
            headers = list(message.get("headers", ()))
            conn.write(self.head(conn.default_headers(), exchange, route, status, headers))
            exchange.status = status
            return
        if exchange.response_complete or kind != "http.response.body":
            raise RuntimeError(f"Unexpected ASGI message '{kind}' on the fast path.")
        body = message.get("body", b"")
        more = message.get("more_body", False)
        if exchange.first_byte is None and (body or not more):
            exchange.first_byte = time.perf_counter()
        if exchange.chunked:
            out = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
            conn.write(out + (b"" if more else b"0\r\n\r\n"))
        else:
            if len(body) > exchange.left:
                raise RuntimeError("Response content longer than Content-Length")
            exchange.left -= len(body)
            conn.write(body)
        if not more:
            if exchange.left:
                raise RuntimeError("Response content shorter than Content-Length")
            exchange.response_complete = True


def _internal_error(defaults: list[tuple[bytes, bytes]]) -> bytes:
    """uvicorn's own 500 (its cycle's send_500_response), for a failure after the handler answered."""
    head = b"".join(b"%s: %s\r\n" % pair for pair in defaults)
    return (
        STATUS_LINE[500]
        + head
        + b"content-type: text/plain; charset=utf-8\r\ncontent-length: 21\r\nconnection: close\r\n\r\n"
        + b"Internal Server Error"
    )


class _Receive:
    """The request's `receive`: its whole body once, then `http.disconnect` when the client goes
    (the handlers read the body from the scope; this is for whatever asks anyway)."""

    __slots__ = ("departure", "exchange", "given")

    def __init__(self, exchange: Exchange, departure: Departure) -> None:
        self.exchange = exchange
        self.departure = departure
        self.given = False

    async def __call__(self) -> Message:
        if not self.given:
            self.given = True
            return {"type": "http.request", "body": self.exchange.body, "more_body": False}
        gone = asyncio.get_running_loop().create_future()

        def tell() -> None:
            if not gone.done():
                gone.set_result(None)

        self.departure.on_gone(tell)
        try:
            await gone
        finally:
            self.departure.forget(tell)
        return {"type": "http.disconnect"}


class Connection(Protocol):
    """What the fast path needs of its connection (serve/connections.py's protocol)."""

    def default_headers(self) -> list[tuple[bytes, bytes]]:
        """uvicorn's default headers (date, server), as its server keeps them current."""
        ...

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    async def drained(self) -> None:
        """Back once the client's side may take more (uvicorn's flow control)."""
        ...

    def finished(self, exchange: Exchange) -> None:
        """The request is over (answered, failed or gone): the next one on the connection may start."""
        ...
