"""/ping and /live answered by a thread of their own, so a saturated event loop does not delay them.

Why: the health checks people run against the front (SageMaker's /ping, a load balancer's, a kubelet's
/live) time out in a few seconds and fail the container after a few misses. Answered by the event loop,
a probe waits for the loop's current turn, and a saturated front's turn holds every ready request:
bench/bench_ceiling.py measured /ping's p99 at 6-87 ms on this 2-core machine with the front saturated
(docs/PERFORMANCE.md, "Front ceiling"), while its own answer costs microseconds.

How: the door is the only acceptor of the listening socket. It reads each connection's first bytes:
- a whole `GET /ping HTTP/1.1` or `GET /live HTTP/1.1` head with no body: the door answers it from
  state (front/probes.py, the same function as the routes), with the headers uvicorn adds, and keeps
  the connection for its next request, or closes it when the client asked;
- anything else (another route, method or version, a query, a body, a malformed or large head): the
  connection goes to the event loop (`loop.connect_accepted_socket`) with the bytes read so far, and
  uvicorn's protocol with every guard of serve/connections.py reads them first, as if it had
  accepted the connection itself. Its header deadline still counts from the door's accept.
So a probe never waits for the loop, and nothing else changes: every other request meets exactly the
server it met before.

The connections the door holds count against NEURONSERVE_MAX_CONNECTIONS with the loop's (the protocol
adds `held()`), and the door closes a connection at accept past the limit and its /ping reserve, as
the protocol did. An incomplete head is closed at the header deadline, an idle one after the
keep-alive time, as uvicorn does.

Why a thread: a probe needs no engine, only state, which is read under the GIL. The GIL is handed
to a waiting thread after `sys.getswitchinterval()`, 5 ms by default; the door lowers it to
SWITCH_S, which only matters while a thread is waiting for the GIL (docs.python.org, sys.setswitchinterval).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from neuronserve.front import probes
from neuronserve.front.state import ServerState
from neuronserve.serve import gilheld
from neuronserve.serve.connections import PING_RESERVE, ConnectionLimits

log = logging.getLogger("neuronserve.serve")

READ_BYTES = 8192  # a probe's head is under 1 KiB; past this the loop's parser and limits take over
ACCEPT_BATCH = 64  # accepts per wake-up, so held connections are read between bursts
ACCEPT_RETRY_S = 1.0  # after a failed accept (EMFILE): asyncio's ACCEPT_RETRY_DELAY
SWITCH_S = 0.0005
REQUEST_LINES = {b"GET /ping HTTP/1.1\r\n": "/ping", b"GET /live HTTP/1.1\r\n": "/live"}
NOT_A_PROBE = frozenset({b"content-length", b"transfer-encoding", b"expect", b"upgrade"})
TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
WAIT = "wait"  # a probe's beginning: read more
OTHER = "other"  # not a probe: the loop serves it

Headers = Sequence[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Probe:
    path: str
    head_len: int
    close: bool  # the client sent `Connection: close`


def classify(data: bytes) -> Probe | str:
    """What the bytes read so far are: a whole probe head, the beginning of one (WAIT), or OTHER."""
    line = next((ln for ln in REQUEST_LINES if data.startswith(ln)), None)
    if line is None:
        return WAIT if any(ln.startswith(data) for ln in REQUEST_LINES) else OTHER
    end = data.find(b"\r\n\r\n", len(line) - 2)
    if end < 0:
        return OTHER if len(data) >= READ_BYTES else WAIT
    close = False
    for header in data[len(line) : end].split(b"\r\n") if end > len(line) - 2 else ():
        name, colon, value = header.partition(b":")
        if not colon or not TOKEN.fullmatch(name) or CONTROL.search(value):
            return OTHER  # the loop's parser answers it (400)
        name = name.lower()
        if name in NOT_A_PROBE:
            return OTHER
        if name == b"connection" and b"close" in (t.strip().lower() for t in value.split(b",")):
            close = True
    return Probe(REQUEST_LINES[line], end + 4, close)


def response_bytes(status: int, headers: Headers, body: bytes, close: bool) -> bytes:
    """One response as uvicorn's httptools protocol writes it: its status line (uvicorn's own table), its
    default headers (date, server), the response's, `connection: close` when closing, then the body."""
    lines = [STATUS_LINE[status]]
    lines += [b"%s: %s\r\n" % (name.lower(), value) for name, value in headers]
    if close:
        lines.append(b"connection: close\r\n")
    lines.append(b"\r\n")
    return b"".join(lines) + body


@dataclass(eq=False)
class _Held:
    fd: int
    head_since: float | None  # the first byte of the request being read (the accept, for a new one)
    deadline: float
    buf: bytes = b""


@dataclass
class DoorLoop:
    """The event loop's side: its loop, a protocol factory, its connection count and default headers."""

    loop: asyncio.AbstractEventLoop
    factory: Callable[[], Any]
    connections: Callable[[], int]
    default_headers: Callable[[], Headers]
    adopting: set[asyncio.Future[Any]] = field(default_factory=set)


class ProbeDoor:
    def __init__(
        self,
        state: ServerState,
        limits: ConnectionLimits,
        keep_alive_s: float,
        extra_headers: Headers = (),
    ) -> None:
        self.state = state
        self.limits = limits
        self.keep_alive_s = keep_alive_s
        self.extra_headers = list(extra_headers)
        self._held: dict[int, _Held] = {}
        self._side: DoorLoop | None = None
        self._listen: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._paused_until = 0.0  # accepting paused after an error, until then (monotonic)
        self._wake_r, self._wake_w = os.pipe()
        self._sel = selectors.DefaultSelector()
        self._reader = gilheld.Reader(READ_BYTES)

    def held(self) -> int:
        """Connections the door holds now (the protocol counts them with its own)."""
        return len(self._held)

    def start(self, sock: socket.socket, side: DoorLoop) -> None:
        self._listen, self._side = sock, side
        sock.setblocking(False)
        self._sel.register(sock, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, self._wake_r)
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_S))
        self._thread = threading.Thread(target=self._run, name="probe-door", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting; close what the door holds and the listening socket (as uvicorn's shutdown)."""
        self._stopping = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(5.0)
        for held in list(self._held.values()):
            self._drop(held)
        with contextlib.suppress(OSError, KeyError, ValueError):
            self._sel.close()
        if self._listen is not None:
            self._listen.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _run(self) -> None:
        while not self._stopping:
            now = time.monotonic()
            soonest = min((h.deadline for h in self._held.values()), default=now + 1.0)
            if self._paused_until:
                soonest = min(soonest, self._paused_until)
            for key, _ in self._sel.select(max(0.0, min(soonest - now, 1.0))):
                try:
                    if key.data is None:
                        self._accept()
                    elif isinstance(key.data, _Held):
                        self._readable(key.data)
                    else:
                        os.read(self._wake_r, 64)
                except Exception:  # never the thread: every later connection depends on it
                    log.exception("probe door: unexpected error; the connection is closed")
                    if isinstance(key.data, _Held):
                        self._drop(key.data)
            now = time.monotonic()
            if self._paused_until and now >= self._paused_until:
                self._paused_until = 0.0
                self._sel.register(self._listen, selectors.EVENT_READ, None)  # type: ignore[arg-type]
            for held in [h for h in self._held.values() if h.deadline <= now]:
                self._drop(held)  # a head not complete in time, or an idle keep-alive connection

    def _accept(self) -> None:
        assert self._listen is not None and self._side is not None
        most = self.limits.max_connections + PING_RESERVE
        for _ in range(ACCEPT_BATCH):
            try:
                fd = gilheld.accept(self._listen.fileno())
            except OSError as err:  # EMFILE and friends: accepting again in a second, as asyncio does
                log.warning("accept failed, trying again in %.0f s: %s", ACCEPT_RETRY_S, err)
                self._sel.unregister(self._listen)
                self._paused_until = time.monotonic() + ACCEPT_RETRY_S
                return
            if fd is None:
                return
            if self._side.connections() + len(self._held) >= most:
                gilheld.close(fd)  # not even /ping: the reserve is taken too (serve/connections.py)
                continue
            now = time.monotonic()
            held = _Held(fd, now, now + self.limits.header_timeout_s)
            self._held[fd] = held
            # a probe usually sends its request with the connect: answered now, never registered
            if self._readable(held):
                self._sel.register(fd, selectors.EVENT_READ, held)

    def _readable(self, held: _Held) -> bool:
        """Read what came and act on it; True while the door keeps the connection."""
        chunk = self._reader.recv(held.fd)
        if chunk is None:
            return True
        if not chunk:
            self._drop(held)  # the client closed (or reset) it
            return False
        if held.head_since is None:
            held.head_since = time.monotonic()
            held.deadline = held.head_since + self.limits.header_timeout_s
        held.buf += chunk
        while held.buf:
            verdict = classify(held.buf)
            if verdict == WAIT:
                return True
            answered = self._answer(held, verdict) if isinstance(verdict, Probe) else None
            if answered is None:
                self._hand_off(held)
                return False
            if not answered:  # answered, and the connection closed
                return False
        return True

    def _answer(self, held: _Held, probe: Probe) -> bool | None:
        """Answer one probe: True, the connection kept; False, closed; None: not answered here (the
        loop will answer it)."""
        assert self._side is not None
        try:
            response = probes.answer(self.state, probe.path)
            headers = [*self._side.default_headers(), *response.raw_headers, *self.extra_headers]
            data = response_bytes(response.status_code, headers, bytes(response.body), probe.close)
        except Exception:  # the state mid-change: the loop answers this one
            log.debug("probe door: %s answered by the loop", probe.path, exc_info=True)
            return None
        sent = gilheld.send(held.fd, data)
        held.buf = held.buf[probe.head_len :]
        if sent != len(data) or probe.close:
            self._drop(held)  # a client that does not read a few hundred bytes is not kept
            return False
        now = time.monotonic()
        held.head_since = now if held.buf else None
        held.deadline = now + (self.limits.header_timeout_s if held.buf else self.keep_alive_s)
        return True

    def _hand_off(self, held: _Held) -> None:
        """The connection and the bytes read so far to the event loop's server."""
        side = self._side
        assert side is not None and held.head_since is not None
        self._forget(held)
        left = self.limits.header_timeout_s - (time.monotonic() - held.head_since)
        try:
            side.loop.call_soon_threadsafe(self._adopt, held.fd, held.buf, max(left, 0.001))
        except RuntimeError:  # the loop is closed: the server is gone
            gilheld.close(held.fd)

    def _adopt(self, fd: int, preread: bytes, head_s: float) -> None:
        """In the loop: uvicorn's protocol takes the connection, `preread` first, its deadline kept."""
        side = self._side
        assert side is not None
        sock = socket.socket(fileno=fd)

        def protocol() -> Any:
            made = side.factory()
            made.preread, made.first_head_s = preread, head_s
            return made

        adopted = asyncio.ensure_future(side.loop.connect_accepted_socket(protocol, sock), loop=side.loop)
        side.adopting.add(adopted)

        def done(fut: asyncio.Future[Any]) -> None:
            side.adopting.discard(fut)
            if not fut.cancelled() and fut.exception() is not None:
                log.warning("a connection could not be handed to the server: %s", fut.exception())
                sock.close()

        adopted.add_done_callback(done)

    def _forget(self, held: _Held) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._sel.unregister(held.fd)
        self._held.pop(held.fd, None)

    def _drop(self, held: _Held) -> None:
        self._forget(held)
        gilheld.close(held.fd)
