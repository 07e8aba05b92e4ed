"""The front's HTTP/1.1 connections: uvicorn's httptools protocol with a header deadline, a header
size limit and a bound on open connections.

Why: uvicorn has none of the three. A client that sent its request line and headers a byte every few
seconds held its connection forever (200 such were all open after 90 s); one 16 MiB header was
accepted, and sent in 1 KiB pieces it cost CPU quadratic in its size (httptools joins the pieces of a
header with `+=`, uvicorn the pieces of the URL), 47 s of PID 1 for 16 MiB.

- Header deadline: from the first byte of a request (from the accept, for a new connection) to the
  end of its headers, at most `header_timeout_s`; then the connection is closed, without an answer
  (the request is not complete enough to answer). Idle keep-alive connections stay uvicorn's
  `timeout_keep_alive`.
- Header size: counted as the bytes arrive, before the parser joins them: over `max_header_bytes`
  the client gets 431 and the connection is closed, so the work per request is bounded by the limit,
  never by what the client sends.
- Open connections: up to `max_connections` serve every route. `PING_RESERVE` more serve only
  the probes, /ping and /live (SageMaker's health check and a kubelet's must keep answering while
  clients hold every connection; other routes get 503 and the connection is closed); beyond those, a
  connection is closed as it is accepted.

Why httptools (not h11): h11 bounds its header buffer itself, but it is pure Python; measured on
/ping, it cost more front CPU per request than httptools plus these checks (docs/RELIABILITY.md), and
the front shares the CPU with the engine. The checks here are a few integer operations per read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from neuronserve.front.disconnect import DEPARTURE_KEY, Departure
from neuronserve.front.errors import error_bytes
from neuronserve.serve.corking import CorkedTransport
from neuronserve.serve.exchange import Exchange
from neuronserve.serve.fastpath import FastPath

log = logging.getLogger("neuronserve.front")

PING_RESERVE = 32  # connections beyond max_connections that may still ask /ping or /live
PING_PATHS = frozenset({b"/ping", b"/live"})
NOT_FAST = frozenset({b"transfer-encoding", b"expect", b"upgrade"})  # heads the fast path leaves to uvicorn
HEADER_TIMEOUT_S = 10.0
MAX_HEADER_BYTES = 64 * 1024
MAX_CONNECTIONS = 1024

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Any]


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float = HEADER_TIMEOUT_S
    max_header_bytes: int = MAX_HEADER_BYTES
    max_connections: int = MAX_CONNECTIONS


def _response(status: int, reason: bytes, message: str) -> bytes:
    """A whole raw response, for a request whose headers never completed (no ASGI cycle to answer it)."""
    body = error_bytes(status, message)
    head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n" % (
        status,
        reason,
        len(body),
    )
    return head + b"connection: close\r\n\r\n" + body


def _refusing_app(status: int, message: str, *, retry: bool = False) -> ASGIApp:
    """An ASGI app answering one fixed refusal and closing the connection (run as uvicorn's cycle)."""
    body = error_bytes(status, message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    if retry:
        headers.append((b"retry-after", b"1"))

    async def app(_scope: Scope, _receive: Any, send: Callable[[Message], Awaitable[None]]) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def _none_held() -> int:
    return 0


def protocol_class(
    limits: ConnectionLimits, held: Callable[[], int] | None = None, fast: FastPath | None = None
) -> type[asyncio.Protocol]:
    """uvicorn's `http=` protocol class with these limits (uvicorn builds one protocol per connection);
    `held`: the connections open outside the loop (serve/probedoor.py), counted with its own; `fast`:
    the fast path for plain generate requests (serve/fastpath.py), None for none."""
    too_large = (
        f"the request line and headers are over {limits.max_header_bytes} bytes "
        "(NEURONSERVE_MAX_HEADER_BYTES)"
    )
    busy = (
        f"over {limits.max_connections} open connections (NEURONSERVE_MAX_CONNECTIONS): "
        "only /ping and /live are answered on this one; retry later"
    )

    class Guarded(_GuardedProtocol):
        LIMITS = limits
        TOO_LARGE = _response(431, b"Request Header Fields Too Large", too_large)
        TOO_LARGE_APP = staticmethod(_refusing_app(431, too_large))
        BUSY_APP = staticmethod(_refusing_app(503, busy, retry=True))
        HELD = staticmethod(held or _none_held)
        FAST = fast

    return Guarded


class _GuardedProtocol(HttpToolsProtocol):
    LIMITS: ConnectionLimits
    TOO_LARGE: bytes
    TOO_LARGE_APP: staticmethod[[Scope, Any, Any], Any]
    BUSY_APP: staticmethod[[Scope, Any, Any], Any]
    HELD: staticmethod[[], int]
    FAST: FastPath | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # from the probe door (serve/probedoor.py): the bytes it read, and what is left of the
        # header deadline it began at its accept
        self.preread = b""
        self.first_head_s: float | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._in_head = False  # between a request's first byte and the end of its headers
        self._head_bytes = 0  # bytes received while in the head (counted before parsing)
        self._head_size = 0  # the URL's and headers' bytes as parsed
        self.departure = Departure()  # fired when the client goes: the gate's requests cancel on it
        # a request the fast path took at its head, while its body arrives (in the same read)
        self._fast_parts: list[bytes] | None = None
        self._fast_start = 0.0
        self._fast_keep = True

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # every write of the connection through one queue, joined per turn of the loop (corking.py)
        super().connection_made(CorkedTransport(transport, self.loop))  # type: ignore[arg-type]
        if self._open() > self.LIMITS.max_connections + PING_RESERVE:
            transport.abort()  # not even /ping: the reserve is taken too
            return
        self._start_head()
        if self.preread:
            data, self.preread = self.preread, b""
            self.data_received(data)

    def _open(self) -> int:
        return len(self.connections) + self.HELD()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)
        self.departure.fire()  # after uvicorn marked its cycle: a receive() now says http.disconnect

    def _start_head(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        self._head_size = 0
        if self._head_timer is None:
            budget, self.first_head_s = self.first_head_s or self.LIMITS.header_timeout_s, None
            self._head_timer = self.loop.call_later(budget, self._head_expired)

    def _stop_head_timer(self) -> None:
        self._in_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_expired(self) -> None:
        """Headers not complete in time: close; a response still being sent finishes first."""
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
            return
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._fast_parts is not None:  # the body did not come whole with its head: uvicorn's cycle
            parts, self._fast_parts = self._fast_parts, None
            if not self.transport.is_closing():
                self._to_cycle(parts, complete=False)
        if self._in_head and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > self.LIMITS.max_header_bytes:
                self._refuse_head()

    def _refuse_head(self) -> None:
        """Too much before the end of the headers: 431 and close, the parser fed no further."""
        self._stop_head_timer()
        log.warning("request head over %d bytes from %s: 431", self.LIMITS.max_header_bytes, self.client)
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(self.TOO_LARGE)
        self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[DEPARTURE_KEY] = self.departure  # type: ignore[literal-required]
        self._start_head()

    def on_url(self, url: bytes) -> None:
        self._head_size += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value) + 4
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        app = None
        if self._head_size > self.LIMITS.max_header_bytes:
            app = self.TOO_LARGE_APP
        elif (
            self._open() > self.LIMITS.max_connections
            and httptools.parse_url(self.url).path not in PING_PATHS
        ):
            app = self.BUSY_APP
        if app is None:
            if self.FAST is None or not self._fast_takes(self.FAST):
                super().on_headers_complete()
            return
        # uvicorn's own cycle answers the refusal (the body, if any, is never read: connection: close)
        served, self.app = self.app, app
        try:
            super().on_headers_complete()
        finally:
            self.app = served

    # The fast path (serve/fastpath.py): a plain generate request answered without uvicorn's cycle.

    def _fast_takes(self, fast: FastPath) -> bool:
        """At the end of a head: whether the fast path takes this request (its body is then collected
        here; serve/fastpath.py says what it takes). Else uvicorn's cycle, as if there were no path."""
        parser = self.parser
        if parser.get_method() != b"POST" or parser.get_http_version() != "1.1":
            return False
        cycle = self.cycle
        if (cycle is not None and not cycle.response_complete) or self.access_log or self.root_path:
            return False
        url = httptools.parse_url(self.url)
        path = url.path
        if path not in fast.handlers or self.limit_concurrency is not None:
            return False
        length = None
        for name, value in self.headers:
            if name == b"content-length":
                if length is not None:
                    return False
                length = value
            elif name in NOT_FAST:
                return False
        if length is None or not length.isdigit() or int(length) > fast.max_body or not fast.open():
            return False
        scope = self.scope
        scope["method"] = "POST"
        scope["path"] = path.decode("ascii")
        scope["raw_path"] = path
        scope["query_string"] = url.query or b""
        self._fast_parts = []
        self._fast_start = time.perf_counter()
        self._fast_keep = parser.should_keep_alive()
        return True

    def on_body(self, body: bytes) -> None:
        if self._fast_parts is not None:
            self._fast_parts.append(body)
        else:
            super().on_body(body)

    def on_message_complete(self) -> None:
        parts = self._fast_parts
        if parts is None:
            super().on_message_complete()
            return
        self._fast_parts = None
        fast = self.FAST
        assert fast is not None
        raw = parts[0] if len(parts) == 1 else b"".join(parts)
        if b"stream" in raw or not fast.admit():  # a stream, or a refusal: the gate's
            self._to_cycle(parts, complete=True)
            return
        scope: Scope = self.scope  # type: ignore[assignment]
        exchange = Exchange(scope, raw, self._fast_keep, self._fast_start)
        self.cycle = exchange  # type: ignore[assignment]  # (what uvicorn reads there, serve/exchange.py)
        task = self.loop.create_task(fast.serve(self, exchange, self.departure))
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(lambda _: fast.unstarted(exchange))
        self.tasks.add(task)

    def _to_cycle(self, parts: list[bytes], *, complete: bool) -> None:
        """The request the fast path took, handed to uvicorn's cycle with what was read of it."""
        HttpToolsProtocol.on_headers_complete(self)
        for part in parts:
            HttpToolsProtocol.on_body(self, part)
        if complete:
            HttpToolsProtocol.on_message_complete(self)

    # serve/exchange.py's Connection

    def default_headers(self) -> list[tuple[bytes, bytes]]:
        return self.server_state.default_headers

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def close(self) -> None:
        self.transport.close()

    async def drained(self) -> None:
        if self.flow.write_paused:
            await self.flow.drain()

    def finished(self, exchange: Exchange) -> None:
        if not exchange.response_complete:  # failed or left half-answered: the connection cannot go on
            exchange.response_complete = True
            exchange.keep_alive = False
        if not exchange.keep_alive:
            self.transport.close()
        self.on_response_complete()
