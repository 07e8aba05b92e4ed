"""/ping and /live answered by a thread of their own, so a saturated event loop does not delay them.

Why: the health checks people run against the front (SageMaker's /ping, a load balancer's, a kubelet's
/live) time out in a few seconds and fail the container after a few misses. Answered by the event loop,
a probe waits for the loop's current turn, and a saturated front's turn holds every ready request:
bench/bench_ceiling.py measured /ping's p99 at 6-87 ms on this 2-core machine with the front saturated
(docs/PERFORMANCE.md, "Front ceiling"), while its own answer costs microseconds.

How: the door is the only acceptor of the listening socket (its loop: serve/doorcore.py, shared with
the door's process kind, serve/doorprocess.py). It reads each connection's first bytes:
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
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from neuronserve.front import probes
from neuronserve.front.state import ServerState
from neuronserve.serve.connections import PING_RESERVE, ConnectionLimits
from neuronserve.serve.doorcore import (
    OTHER,
    READ_BYTES,
    WAIT,
    DoorCore,
    DoorLimits,
    Probe,
    classify,
    drain_pipe,
)

__all__ = [
    "OTHER",
    "READ_BYTES",
    "WAIT",
    "DoorLoop",
    "Headers",
    "Probe",
    "ProbeDoor",
    "classify",
    "response_bytes",
]

log = logging.getLogger("neuronserve.serve")

SWITCH_S = 0.0005

Headers = Sequence[tuple[bytes, bytes]]


def response_bytes(status: int, headers: Headers, body: bytes, close: bool) -> bytes:
    """One response as uvicorn's httptools protocol writes it: its status line (uvicorn's own table), its
    default headers (date, server), the response's, `connection: close` when closing, then the body."""
    lines = [STATUS_LINE[status]]
    lines += [b"%s: %s\r\n" % (name.lower(), value) for name, value in headers]
    if close:
        lines.append(b"connection: close\r\n")
    lines.append(b"\r\n")
    return b"".join(lines) + body


def probe_bytes(state: ServerState, path: str, default: Headers, extra: Headers, close: bool) -> bytes:
    """The bytes the route answers `GET path` with now (front/probes.py), as uvicorn would write them."""
    response = probes.answer(state, path)
    headers = [*default, *response.raw_headers, *extra]
    return response_bytes(response.status_code, headers, bytes(response.body), close)


def door_limits(limits: ConnectionLimits, keep_alive_s: float) -> DoorLimits:
    return DoorLimits(limits.header_timeout_s, limits.max_connections + PING_RESERVE, keep_alive_s)


@dataclass
class DoorLoop:
    """The event loop's side: its loop, a protocol factory, its connection count and default headers."""

    loop: asyncio.AbstractEventLoop
    factory: Callable[[], Any]
    connections: Callable[[], int]
    default_headers: Callable[[], Headers]
    adopting: set[asyncio.Future[Any]] = field(default_factory=set)


def adopt(side: DoorLoop, fd: int, preread: bytes, head_s: float) -> None:
    """In the loop: uvicorn's protocol takes connection `fd`, `preread` first, its header deadline kept."""
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


class ProbeDoor(DoorCore):
    """The door as a thread of the front: it answers from the front's state itself."""

    def __init__(
        self,
        state: ServerState,
        limits: ConnectionLimits,
        keep_alive_s: float,
        extra_headers: Headers = (),
    ) -> None:
        super().__init__(door_limits(limits, keep_alive_s))
        self.state = state
        self.extra_headers = list(extra_headers)
        self._side: DoorLoop | None = None
        self._listen: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe()

    def start(self, sock: socket.socket, side: DoorLoop) -> None:
        self._listen, self._side = sock, side
        sock.setblocking(False)
        self.listen(sock.fileno())
        self.watch(self._wake_r, drain_pipe(self._wake_r))
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_S))
        self._thread = threading.Thread(target=self.run, name="probe-door", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting; close what the door holds and the listening socket (as uvicorn's shutdown)."""
        self.stopping = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(5.0)
        self.close_all()
        if self._listen is not None:
            self._listen.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def response(self, probe: Probe) -> bytes | None:
        assert self._side is not None
        try:
            return probe_bytes(
                self.state, probe.path, self._side.default_headers(), self.extra_headers, probe.close
            )
        except Exception:  # the state mid-change: the loop answers this one
            log.debug("probe door: %s answered by the loop", probe.path, exc_info=True)
            return None

    def give(self, fd: int, preread: bytes, head_s: float) -> None:
        side = self._side
        assert side is not None
        try:
            side.loop.call_soon_threadsafe(adopt, side, fd, preread, head_s)
        except RuntimeError:  # the loop is closed: the server is gone
            os.close(fd)

    def front_connections(self) -> int:
        assert self._side is not None
        return self._side.connections()
