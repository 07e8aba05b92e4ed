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
- Content-Length: more than MAX_LENGTH_DIGITS digits is refused with 400 before any route sees it
  (llhttp accepts leading zeros, and Python's int() refuses a string of over 4,300 digits: each route
  reading it would fail its own way, a 500 for most).
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
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from neuronserve.front.disconnect import DEPARTURE_KEY, Departure
from neuronserve.front.errors import error_bytes
from neuronserve.serve.corking import CorkedTransport

log = logging.getLogger("neuronserve.front")

PING_RESERVE = 32  # connections beyond max_connections that may still ask /ping or /live
PING_PATHS = frozenset({b"/ping", b"/live"})
MAX_LENGTH_DIGITS = 19  # a Content-Length of more digits is not a length (2**63 has 19)
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


def protocol_class(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's `http=` protocol class with these limits (uvicorn builds one protocol per connection)."""
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

    return Guarded


class _GuardedProtocol(HttpToolsProtocol):
    LIMITS: ConnectionLimits
    TOO_LARGE: bytes
    TOO_LARGE_APP: staticmethod[[Scope, Any, Any], Any]
    BUSY_APP: staticmethod[[Scope, Any, Any], Any]
    LENGTH_APP = staticmethod(
        _refusing_app(400, f"the Content-Length has more than {MAX_LENGTH_DIGITS} digits: not a length")
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._in_head = False  # between a request's first byte and the end of its headers
        self._head_bytes = 0  # bytes received while in the head (counted before parsing)
        self._head_size = 0  # the URL's and headers' bytes as parsed
        self._began = False  # a request began in the read being parsed
        self._absurd_length = False  # a Content-Length of more than MAX_LENGTH_DIGITS digits
        self.departure = Departure()  # fired when the client goes: the gate's requests cancel on it

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # every write of the connection through one queue, joined per turn of the loop (corking.py)
        super().connection_made(CorkedTransport(transport, self.loop))  # type: ignore[arg-type]
        if len(self.connections) > self.LIMITS.max_connections + PING_RESERVE:
            transport.abort()  # not even /ping: the reserve is taken too
            return
        self._start_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)
        self.departure.fire()  # after uvicorn marked its cycle: a receive() now says http.disconnect

    def _start_head(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        self._head_size = 0
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.LIMITS.header_timeout_s, self._head_expired)

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
        self._began = False
        super().data_received(data)
        if self._in_head and not self.transport.is_closing():
            # A head that began in this read may follow the end of an earlier request's body in it (a
            # pipelined request after a large upload): its share of the read is unknown, so what the
            # parser has taken of it stands for it; every later read counts whole. One read is bounded
            # by the transport's buffer, and the parsed size is checked again at the end of the head.
            self._head_bytes = self._head_size if self._began else self._head_bytes + len(data)
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
        self._began = True
        self._absurd_length = False
        self._start_head()

    def on_url(self, url: bytes) -> None:
        self._head_size += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value) + 4
        if len(value) > MAX_LENGTH_DIGITS and name.lower() == b"content-length":
            self._absurd_length = True
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        app = None
        if self._head_size > self.LIMITS.max_header_bytes:
            app = self.TOO_LARGE_APP
        elif self._absurd_length:
            app = self.LENGTH_APP
        elif (
            len(self.connections) > self.LIMITS.max_connections
            and httptools.parse_url(self.url).path not in PING_PATHS
        ):
            app = self.BUSY_APP
        if app is None:
            super().on_headers_complete()
            return
        # uvicorn's own cycle answers the refusal (the body, if any, is never read: connection: close)
        served, self.app = self.app, app
        try:
            super().on_headers_complete()
        finally:
            self.app = served
