"""The fast path's answer on the wire, written as uvicorn's request cycle writes it.

Why: the fast path (serve/fastpath.py) answers below uvicorn's cycle, and a client must not be able
to tell: the same status lines, default headers (date, server), header checks, lower-cased names,
`connection: close` and chunked framing, and the same refusals of a bad name or value. The head is
built as uvicorn's RequestResponseCycle.send builds it (uvicorn/protocols/http/httptools_impl.py as
installed here, 0.54.0, l. 463: default headers first, names checked against HEADER_RE, values
against HEADER_VALUE_RE), from the usual path's headers: the app's (its request id replaced by the
one decided), the replica's (front/router.py), the id, the worker's tags. tests/unit/serve/
test_fastanswer.py checks the head against that very method for any headers; tests/integration/
serve/test_fastpath.py checks whole answers byte for byte against the usual path.

A one-body answer (the common case) leaves in one write, head and body; an answer in several
messages (a stream the body did not announce) is written by `send`, an ASGI send with uvicorn's
flow control and framing.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from typing import Any

from starlette.responses import Response
from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE, STATUS_LINE

from neuronserve.front.gate import request_id
from neuronserve.front.router import replica_tag
from neuronserve.serve.exchange import Connection, Exchange

Message = MutableMapping[str, Any]

_REQUEST_ID = b"x-request-id"
_NAMES_KEPT = 256  # header names checked once and remembered (a handful in practice)


class AnswerWriter:
    """Writes the fast path's answers; one per front process (it remembers the header names it has
    checked, and holds the headers every answer carries last: the worker's tag, with several front
    workers)."""

    def __init__(self, tags: tuple[tuple[bytes, bytes], ...]) -> None:
        self.tags = list(tags)
        self._names: set[bytes] = set()

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


def internal_error(defaults: list[tuple[bytes, bytes]]) -> bytes:
    """uvicorn's own 500 (its cycle's send_500_response), for a failure after the handler answered."""
    head = b"".join(b"%s: %s\r\n" % pair for pair in defaults)
    return (
        STATUS_LINE[500]
        + head
        + b"content-type: text/plain; charset=utf-8\r\ncontent-length: 21\r\nconnection: close\r\n\r\n"
        + b"Internal Server Error"
    )
