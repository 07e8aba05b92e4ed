"""One keep-alive HTTP/1.1 connection to an engine, and the answer read from it: the front's hot path.

Why not aiohttp's client for this: measured under load with a synthetic engine (docs/PERFORMANCE.md,
"Front ceiling"), aiohttp's ClientSession.request and its response and stream readers were the largest
part of the front's CPU per proxied request (a request object, a URL, two header multidicts, trace
hooks and a timer rescheduled on every read). The engine is a local HTTP/1.1 server we start
ourselves, so the client needs little: write one request, parse the answer with httptools (the C
parser uvicorn uses for the front's own requests), hand its body over as it arrives.

Semantics kept from the aiohttp client it replaces (front/proxy.py says what the callers rely on):
the engine's bytes pass as they are (no decompression); `read_timeout_s` is the longest the engine may
stay silent while an answer is awaited (before its headers and between body chunks, never while the
front itself has paused reading); a body not read to its end closes the connection, which is how
vLLM learns that nobody reads a generation and aborts it; a body read to its end leaves the
connection to be reused. Flow control: past PAUSE_BYTES of unread body the socket is not read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httptools

PAUSE_BYTES = 1 << 18  # unread body bytes that pause reading from the engine
_NO_BODY = (204, 304)


class EngineGone(ConnectionError):
    """The engine closed the connection (or broke the protocol) before its answer was complete."""


class Unreached(ConnectionError):
    """The request never reached the engine: no connection, or closed before any answer byte."""


class ConnectTimeout(Unreached, TimeoutError):
    """The TCP connect to the engine took longer than its limit."""


class Headers:
    """The answer's headers: names lower-cased, values as sent (latin-1: byte for byte)."""

    __slots__ = ("_map", "_pairs")

    def __init__(self) -> None:
        self._pairs: list[tuple[str, str]] = []
        self._map: dict[str, str] = {}

    def add(self, name: bytes, value: bytes) -> None:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        self._pairs.append((key, text))
        self._map.setdefault(key, text)

    def get(self, name: str, default: Any = None) -> Any:
        return self._map.get(name.lower(), default)

    def items(self) -> list[tuple[str, str]]:
        return self._pairs


class Connection(asyncio.Protocol):
    """One connection; at most one request on it at a time (no pipelining)."""

    def __init__(self, key: tuple[str, int]) -> None:
        self.key = key
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False  # it served a request before this one
        self.idle_since = 0.0
        self.answer: EngineResponse | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        answer = self.answer
        if answer is None:  # bytes nobody asked for: the connection cannot be trusted again
            self.close()
            return
        answer.last_read = self.loop.time()
        answer.got_bytes = True
        try:
            answer.parser.feed_data(data)
        except httptools.HttpParserError:
            answer.fail(EngineGone("the engine's answer is not valid HTTP/1.1"))
            self.close()
            return
        if answer.chunks:  # body arrived in this read: flow control and the waiter, once per read
            answer.arrived()

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        answer = self.answer
        if answer is not None and not answer.complete:
            if answer.until_eof and answer.started:
                answer.finish()  # no length, no chunks: the body ends with the connection
            elif answer.got_bytes:
                answer.fail(EngineGone("the engine closed the connection mid-answer"))
            else:
                answer.fail(Unreached("the engine closed the connection before answering"))

    def pause_writing(self) -> None:  # a request body bigger than the socket buffer: written anyway
        pass

    def resume_writing(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class EngineResponse:
    """One answer: status and headers once `started`, then the body as it arrives (aiohttp's
    ClientResponse, the part the front used: status, headers, read, iter_any, at_eof, release, close)."""

    def __init__(self, conn: Connection, pool: Any, read_timeout_s: float, head: bool) -> None:
        self.conn = conn
        self.pool = pool
        self.read_timeout_s = read_timeout_s
        self.head = head  # a HEAD request: no body follows the headers
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers = Headers()
        self.started = self.complete = self.got_bytes = self.until_eof = self.keep_alive = False
        self.error: BaseException | None = None
        self.chunks: list[bytes] = []
        self.buffered = 0
        self.paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.last_read = conn.loop.time()
        self.timer: asyncio.TimerHandle | None = None
        self.released = False

    # httptools callbacks (they must not raise: the parser would wrap the error)
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.add(name, value)

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if 100 <= self.status < 200:  # an interim answer: its headers are not the answer's
            self.headers = Headers()
            return
        has_length = self.headers.get("content-length") is not None
        chunked = "chunked" in (self.headers.get("transfer-encoding") or "").lower()
        self.until_eof = not (has_length or chunked or self.status in _NO_BODY)
        self.keep_alive = self.parser.should_keep_alive()  # read now: llhttp resets it at the end
        self.started = True
        if self.head:  # httptools would wait for the body a HEAD answer never has: end it here
            self.conn.answer = None
            self.finish()
            self.conn.close()
            return
        self._wake()

    def on_body(self, body: bytes) -> None:
        """One piece of the body (a chunk of a chunked answer: one engine event each). Only kept here:
        Connection.data_received calls `arrived` once after the whole read is parsed, not per piece
        (a read of a stream carries several events)."""
        self.chunks.append(body)
        self.buffered += len(body)

    def arrived(self) -> None:
        """After a read that brought body bytes: pause reading past PAUSE_BYTES, wake the reader."""
        if self.buffered > PAUSE_BYTES and not self.paused and self.conn.transport is not None:
            self.paused = True
            self.conn.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.started:
            self.finish()

    # state changes
    def finish(self) -> None:
        self.complete = True
        self._stop_timer()
        if self.conn.answer is self:
            self.conn.answer = None
        self._wake()

    def fail(self, error: BaseException) -> None:
        if self.error is None and not self.complete:
            self.error = error
        self._stop_timer()
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # the silence timer: armed while the front waits on the engine, checked only when it fires
    def _arm(self) -> None:
        if self.timer is None and self.read_timeout_s:
            when = self.last_read + self.read_timeout_s
            self.timer = self.conn.loop.call_at(when, self._expire)

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expire(self) -> None:
        self.timer = None
        if self.complete or self.error is not None or self.paused:
            return  # paused: the front is not reading, so the engine is not silent (re-armed on resume)
        if self.conn.loop.time() < self.last_read + self.read_timeout_s:
            self._arm()  # data arrived meanwhile: wait for the rest of the silence
            return
        self.fail(TimeoutError("the engine sent nothing within the read timeout"))
        self.conn.close()

    async def _wait(self) -> None:
        if self.paused and self.conn.transport is not None:
            self.paused = False
            self.conn.transport.resume_reading()
            self.last_read = self.conn.loop.time()  # the silence counts from now, not from the pause
        self._arm()
        self.waiter = self.conn.loop.create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    async def start(self) -> None:
        """Until the status and headers are in (or the error that stopped them)."""
        while not self.started and self.error is None:
            await self._wait()
        if self.error is not None and not self.started:
            raise self.error
        if not self.chunks and not self.complete:
            self._stop_timer()  # nobody waits on the engine until the body is asked for

    async def chunk(self) -> bytes:
        """What arrived of the body since the last call, waiting for some; b"" at its end."""
        while not self.chunks:
            if self.error is not None:
                raise self.error
            if self.complete:
                return b""
            await self._wait()
        data = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        self.chunks.clear()
        self.buffered = 0
        if self.paused and self.conn.transport is not None:
            self.paused = False
            self.conn.transport.resume_reading()
            self.last_read = self.conn.loop.time()  # the silence counts from now, not from the pause
        return data

    async def iter_any(self) -> AsyncIterator[bytes]:
        while chunk := await self.chunk():
            yield chunk

    async def read(self) -> bytes:
        parts = []
        while chunk := await self.chunk():
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def at_eof(self) -> bool:
        return self.complete and not self.chunks

    @property
    def content(self) -> EngineResponse:  # aiohttp's resp.content.iter_any() / at_eof()
        return self

    def release(self) -> None:
        """Done with the answer: its connection back to the pool when read to its end, else closed."""
        if self.released:
            return
        self.released = True
        self._stop_timer()
        reusable = self.complete and self.error is None and not self.until_eof and not self.head
        reusable = reusable and self.keep_alive
        if self.conn.answer is self:
            self.conn.answer = None
        if not reusable:
            self.conn.close()
        self.pool.give_back(self.conn)

    def close(self) -> None:
        if not self.complete:
            self.conn.close()
        self.release()
