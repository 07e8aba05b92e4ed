"""The probe door's loop: accept, read each connection's first bytes, answer the probes, hand on the rest.

Why a module of its own: the door runs either as a thread of the front (serve/probedoor.py) or as a
process of its own (serve/doorchild.py, started by serve/doorprocess.py), and both must accept,
read, classify, hold and time out connections the same way. What differs is where an answer comes
from, where a connection that is not a probe goes, and how many connections the front holds; a
subclass says those three. This module imports only the standard library and serve/gilheld.py, so
the door's process starts in a fraction of the front's time and memory.

What counts as a probe (`classify`): a whole `GET /ping HTTP/1.1` or `GET /live HTTP/1.1` head with no
body. Anything else (another route, method or version, a query, a body, a malformed or large head)
goes to the front's event loop with the bytes read so far, where uvicorn's protocol and every guard
of serve/connections.py read them first. An incomplete head is closed at the header deadline, an
idle kept connection after the keep-alive time, as uvicorn does; a connection past the bound (the
front's and the door's together, with the /ping reserve) is closed at accept, as the protocol did.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import selectors
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neuronserve.serve import gilheld

log = logging.getLogger("neuronserve.serve")

READ_BYTES = 8192  # a probe's head is under 1 KiB; past this the loop's parser and limits take over
ACCEPT_BATCH = 64  # accepts per wake-up, so held connections are read between bursts
ACCEPT_RETRY_S = 1.0  # after a failed accept (EMFILE): asyncio's ACCEPT_RETRY_DELAY
REQUEST_LINES = {b"GET /ping HTTP/1.1\r\n": "/ping", b"GET /live HTTP/1.1\r\n": "/live"}
NOT_A_PROBE = frozenset({b"content-length", b"transfer-encoding", b"expect", b"upgrade"})
TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
WAIT = "wait"  # a probe's beginning: read more
OTHER = "other"  # not a probe: the loop serves it


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


@dataclass(frozen=True)
class DoorLimits:
    """The connection limits the door applies (serve/connections.py ConnectionLimits, flattened so the
    door's process needs none of the server's modules)."""

    header_timeout_s: float
    most_connections: int  # max_connections + the /ping reserve: past it, closed at accept
    keep_alive_s: float


@dataclass(eq=False)
class Held:
    fd: int
    head_since: float | None  # the first byte of the request being read (the accept, for a new one)
    deadline: float
    buf: bytes = b""


class DoorCore:
    """The door's loop over one listening socket (non-blocking); run by `run` until `stopping`."""

    def __init__(self, limits: DoorLimits) -> None:
        self.limits = limits
        self.stopping = False
        self._held: dict[int, Held] = {}
        self._listen_fd = -1
        self._paused_until = 0.0  # accepting paused after an error, until then (monotonic)
        self._sel = selectors.DefaultSelector()
        self._reader = gilheld.Reader(READ_BYTES)

    # what a kind of door says
    def response(self, probe: Probe) -> bytes | None:
        """The whole answer to `probe` (its `close` honoured); None: the loop answers it instead."""
        raise NotImplementedError

    def give(self, fd: int, preread: bytes, head_s: float) -> None:
        """Hand connection `fd` to the front's loop, `preread` first, with `head_s` of its header
        deadline left; the door no longer owns `fd` after this."""
        raise NotImplementedError

    def front_connections(self) -> int:
        """The connections the front's loop holds now."""
        raise NotImplementedError

    def held_changed(self) -> None:
        """Called after the door's count of held connections changed (the process door publishes it)."""

    # the loop
    def held(self) -> int:
        """Connections the door holds now."""
        return len(self._held)

    def listen(self, fd: int) -> None:
        self._listen_fd = fd
        self._sel.register(fd, selectors.EVENT_READ, None)

    def watch(self, fd: int, callback: Callable[[], None]) -> None:
        """Call `callback` in the loop whenever `fd` is readable (a wake-up pipe, the front's channel)."""
        self._sel.register(fd, selectors.EVENT_READ, callback)

    def run(self) -> None:
        while not self.stopping:
            now = time.monotonic()
            soonest = min((h.deadline for h in self._held.values()), default=now + 1.0)
            if self._paused_until:
                soonest = min(soonest, self._paused_until)
            for key, _ in self._sel.select(max(0.0, min(soonest - now, 1.0))):
                data: Any = key.data
                try:
                    if data is None:
                        self._accept()
                    elif isinstance(data, Held):
                        self._readable(data)
                    else:
                        data()
                except Exception:  # never the loop: every later connection depends on it
                    log.exception("probe door: unexpected error; the connection is closed")
                    if isinstance(data, Held):
                        self._drop(data)
            now = time.monotonic()
            if self._paused_until and now >= self._paused_until:
                self._paused_until = 0.0
                self._sel.register(self._listen_fd, selectors.EVENT_READ, None)
            for held in [h for h in self._held.values() if h.deadline <= now]:
                self._drop(held)  # a head not complete in time, or an idle keep-alive connection

    def close_all(self) -> None:
        """Close every held connection and the selector (the listening socket is its owner's)."""
        for held in list(self._held.values()):
            self._drop(held)
        with contextlib.suppress(OSError, KeyError, ValueError):
            self._sel.close()

    def _accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                fd = gilheld.accept(self._listen_fd)
            except OSError as err:  # EMFILE and friends: accepting again in a second, as asyncio does
                log.warning("accept failed, trying again in %.0f s: %s", ACCEPT_RETRY_S, err)
                self._sel.unregister(self._listen_fd)
                self._paused_until = time.monotonic() + ACCEPT_RETRY_S
                return
            if fd is None:
                return
            if self.front_connections() + self.held() >= self.limits.most_connections:
                gilheld.close(fd)  # not even /ping: the reserve is taken too (serve/connections.py)
                continue
            now = time.monotonic()
            held = Held(fd, now, now + self.limits.header_timeout_s)
            self._held[fd] = held
            self.held_changed()
            # a probe usually sends its request with the connect: answered now, never registered
            if self._readable(held):
                self._sel.register(fd, selectors.EVENT_READ, held)

    def _readable(self, held: Held) -> bool:
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

    def _answer(self, held: Held, probe: Probe) -> bool | None:
        """Answer one probe: True, the connection kept; False, closed; None: not answered here."""
        data = self.response(probe)
        if data is None:
            return None
        sent = gilheld.send(held.fd, data)
        held.buf = held.buf[probe.head_len :]
        if sent != len(data) or probe.close:
            self._drop(held)  # a client that does not read a few hundred bytes is not kept
            return False
        now = time.monotonic()
        held.head_since = now if held.buf else None
        held.deadline = now + (self.limits.header_timeout_s if held.buf else self.limits.keep_alive_s)
        return True

    def _hand_off(self, held: Held) -> None:
        assert held.head_since is not None
        self._forget(held)
        left = self.limits.header_timeout_s - (time.monotonic() - held.head_since)
        self.give(held.fd, held.buf, max(left, 0.001))

    def _forget(self, held: Held) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._sel.unregister(held.fd)
        if self._held.pop(held.fd, None) is not None:
            self.held_changed()

    def _drop(self, held: Held) -> None:
        self._forget(held)
        gilheld.close(held.fd)


def drain_pipe(fd: int) -> Callable[[], None]:
    """A `watch` callback that empties a wake-up pipe."""

    def read() -> None:
        with contextlib.suppress(OSError):
            os.read(fd, 64)

    return read
