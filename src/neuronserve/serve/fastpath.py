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
the answer as uvicorn's cycle writes it (serve/fastanswer.py: the usual path's answer, byte for
byte, tests/integration/serve/test_fastpath.py).

What it relies on of uvicorn (uvicorn/protocols/http/httptools_impl.py as installed here, 0.54.0;
a version that changes any of it fails tests/unit/serve/test_exchange.py, test_fastanswer.py or
tests/integration/serve/test_fastpath.py): the protocol reads its
`cycle` in connection_lost (l. 116: sets `disconnected`, `message_event`), on_headers_complete
(l. 248: queues a pipelined request while `response_complete` is false), on_response_complete
(l. 327: starts the next one or arms the keep-alive timer) and shutdown (l. 349: clears
`keep_alive`), all through the Exchange in that slot (serve/exchange.py); the head and body are
written as RequestResponseCycle.send writes them (serve/fastanswer.py, l. 463).

NEURONSERVE_FAST_PATH=false turns it off (every request takes uvicorn's cycle and the gate).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from neuronserve.front.disconnect import CLIENT_CLOSED, CancelOnLeave, Departure
from neuronserve.front.gate import BODY_KEY, Gate
from neuronserve.front.request_cost import CHARGE_KEY, Charge
from neuronserve.front.router import enter_route, leave_route
from neuronserve.front.state import Phase
from neuronserve.serve.exchange import Connection, Exchange
from neuronserve.serve.fastanswer import AnswerWriter, Message, internal_error

log = logging.getLogger("neuronserve.front")

Handler = Callable[[Request], Awaitable[Response]]

PATHS = ("/invocations", "/generate", "/")  # POSTs that generate and answer in one body (routes.TABLE)


class FastPath:
    """The fast path's shared part, one per front process: the gate whose state, limiter, metrics and
    access line it uses, the handlers of its routes, and the writer of its answers (serve/
    fastanswer.py), which holds the headers every answer carries last (the worker's tag, with several
    front workers)."""

    def __init__(
        self, gate: Gate, handlers: dict[str, Handler], tags: tuple[tuple[bytes, bytes], ...]
    ) -> None:
        self.gate = gate
        self.handlers = {path.encode(): handlers[path] for path in PATHS}
        self.writer = AnswerWriter(tags)
        self.max_body = gate.max_body_bytes
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
                await response(scope, receive, lambda m: self.writer.send(conn, exchange, route, m))
            else:
                self.writer.write_whole(conn, exchange, route, response)
        except asyncio.CancelledError:
            if not leave.caused():
                raise
            gone = True
        except Exception as err:  # as uvicorn's cycle: logged; a 500 if nothing was written, else closed
            log.error("Exception in ASGI application (the fast path)", exc_info=err)
            if exchange.status == 0 and not exchange.disconnected:
                conn.write(internal_error(conn.default_headers()))
                exchange.status = 500
            exchange.keep_alive = False
            conn.close()
        finally:
            departure.forget(leave)
            leave_route(route)
            gate.finish(
                scope, charge, CLIENT_CLOSED if gone else exchange.status, exchange.start, exchange.first_byte
            )
            conn.finished(exchange)


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
