"""The front's pool of keep-alive connections to its engine(s), and one request sent through it.

The limits are aiohttp's, which this replaces on the hot path (front/enginehttp.py says why; front/proxy.py
sizes the pool): at most `limit` connections open to all engines together; a request that finds them
all busy waits for one, and that wait plus the TCP connect is bounded by `wait_s` (the request
deadline: a saturated engine is slow, not down), the connect alone by `connect_s`; an answer's silence
by `read_s`.

A connection is reused only when its last answer was read to its end and the engine kept it alive.
An engine may close an idle keep-alive connection at the moment the front sends on it (uvicorn closes
idle ones after 5 s, vLLM's default): a request that then meets the close before any byte of an answer
is sent once more, on a new connection (the engine never saw it: a server closes only idle
connections). Any other failure is the caller's: `Unreached` (no connection, nothing answered),
TimeoutError (connect, wait or silence), EngineGone (the answer broke off).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Mapping
from urllib.parse import urlsplit

from neuronserve.front.enginehttp import Connection, ConnectTimeout, EngineResponse, Unreached

IDLE_MAX_S = 60.0  # an idle connection older than this is closed rather than reused
_SKIP = frozenset({"host", "content-length", "transfer-encoding"})  # the request line's own to write
_NO_BODY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "CONNECT"})  # no Content-Length: 0


def _key(base_url: str) -> tuple[str, int]:
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"the engine URL must be http://host:port, not {base_url!r}")
    return parts.hostname, parts.port or 80


def request_head(
    method: str, path_query: str, key: tuple[str, int], headers: Mapping[str, str] | None, body: bytes | None
) -> bytes:
    """The request line and headers, as aiohttp wrote them: Host, the caller's headers, `Accept: */*`
    and a body's `Content-Type: application/octet-stream` unless given, its Content-Length. A line
    break in a name or value is refused (it would start a header of the client's choosing)."""
    host, port = key
    lines = [f"{method} {path_query} HTTP/1.1\r\nHost: {host}:{port}\r\n"]
    accept = ctype = False
    for name, value in (headers or {}).items():
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
            raise ValueError(f"a line break in the header {name[:40]!r}")
        lower = name.lower()
        if lower in _SKIP:
            continue
        accept = accept or lower == "accept"
        ctype = ctype or lower == "content-type"
        lines.append(f"{name}: {value}\r\n")
    if not accept:
        lines.append("Accept: */*\r\n")
    if body is not None:
        if not ctype:
            lines.append("Content-Type: application/octet-stream\r\n")
        lines.append(f"Content-Length: {len(body)}\r\n")
    elif method not in _NO_BODY_METHODS:
        lines.append("Content-Length: 0\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("latin-1")


class EnginePool:
    def __init__(self, limit: int, *, wait_s: float, connect_s: float, read_s: float) -> None:
        self.limit = limit
        self.wait_s, self.connect_s, self.read_s = wait_s, connect_s, read_s
        self.idle: dict[tuple[str, int], list[Connection]] = {}
        self.open = 0  # connections counted against the limit: busy, idle, or closed and not yet dropped
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.keys: dict[str, tuple[str, int]] = {}

    async def request(
        self,
        base_url: str,
        method: str,
        path_query: str,
        headers: Mapping[str, str] | None,
        body: bytes | None,
    ) -> EngineResponse:
        """Send; returns once the answer's status and headers are in (its body left to read)."""
        key = self.keys.get(base_url) or self.keys.setdefault(base_url, _key(base_url))
        head = request_head(method, path_query, key, headers, body)
        wire = head + body if body else head
        while True:
            conn = await self._acquire(key)
            answer = EngineResponse(conn, self, self.read_s, method == "HEAD")
            conn.answer = answer
            assert conn.transport is not None
            conn.transport.write(wire)
            try:
                await answer.start()
            except Unreached:
                answer.release()  # closed: the connection is dropped
                if conn.reused:
                    continue  # an idle connection the engine had closed: the request was never seen
                raise
            except BaseException:
                answer.close()  # cancelled or silent: the engine learns from the close
                raise
            return answer

    async def _acquire(self, key: tuple[str, int]) -> Connection:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        while True:
            conns = self.idle.get(key)
            now = loop.time()
            while conns:
                conn = conns.pop()
                if not conn.closed and now - conn.idle_since < IDLE_MAX_S:
                    conn.reused = True
                    return conn
                self._drop(conn)
            if self.open < self.limit or self._drop_idle_elsewhere():
                self.open += 1
                try:
                    return await self._connect(key, loop)
                except BaseException:
                    self.open -= 1
                    self._wake_one()
                    raise
            waiter = loop.create_future()
            self.waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except BaseException as err:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, but leaving: the connection that came free is another's
                else:
                    waiter.cancel()
                    self._forget(waiter)
                if isinstance(err, TimeoutError):
                    raise TimeoutError("no connection to the engine came free in time") from None
                raise

    async def _connect(self, key: tuple[str, int], loop: asyncio.AbstractEventLoop) -> Connection:
        try:
            async with asyncio.timeout(self.connect_s):
                _, conn = await loop.create_connection(lambda: Connection(key), key[0], key[1])
        except TimeoutError:
            raise ConnectTimeout(
                f"no TCP connection to {key[0]}:{key[1]} within {self.connect_s:g} s"
            ) from None
        except OSError as err:
            raise Unreached(f"cannot connect to {key[0]}:{key[1]}: {err}") from err
        return conn

    def give_back(self, conn: Connection) -> None:
        """An answer is done with its connection: kept idle when still open, else dropped."""
        if conn.closed:
            self.open -= 1
        else:
            conn.idle_since = conn.loop.time()
            self.idle.setdefault(conn.key, []).append(conn)
        self._wake_one()

    def _drop(self, conn: Connection) -> None:
        conn.close()
        self.open -= 1

    def _drop_idle_elsewhere(self) -> bool:
        """At the limit: an idle connection to another engine makes room (True when one did)."""
        for conns in self.idle.values():
            if conns:
                self._drop(conns.pop(0))
                return True
        return False

    def _wake_one(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):  # already woken and taken off
            self.waiters.remove(waiter)

    def close(self) -> None:
        for conns in self.idle.values():
            for conn in conns:
                self._drop(conn)
            conns.clear()
