"""The probe door's process (`python -m neuronserve.serve.doorchild CONFIG`, started by
serve/doorprocess.py): the door's loop (serve/doorcore.py) with no event loop and no GIL to share.

It accepts on the listening socket it inherited, answers the probes with the bytes the front
published (serve/probeboard.py), and sends every other connection to the front over a Unix socket
(SCM_RIGHTS: the descriptor itself, with the bytes read so far and what is left of its header
deadline), where the front's event loop adopts it as the thread door's would.

It stops when that Unix socket reaches its end: the front closed it (its shutdown) or died (the
kernel closed it). Then it closes the connections it holds and its copy of the listening socket, so
a door never outlives its front. SIGTERM and SIGINT are the front's to act on (a drain): ignored
here, so a signal sent to the whole process group still drains through the front.

A hand-off that the front cannot take yet (its loop is blocked and the Unix socket's buffer full) is
kept and sent when the socket is writable again: a connection is never dropped for it.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import mmap
import os
import selectors
import signal
import socket
import struct
import sys

from neuronserve import logsetup
from neuronserve.serve import shortslice
from neuronserve.serve.doorcore import DoorCore, DoorLimits, Probe
from neuronserve.serve.engineexits import EngineExits
from neuronserve.serve.probeboard import ProbeBoard

log = logging.getLogger("neuronserve.serve")

HEAD_S = struct.Struct("<d")  # a hand-off message: the header deadline left, then the bytes read


class ChildDoor(DoorCore):
    def __init__(
        self,
        limits: DoorLimits,
        board: ProbeBoard,
        channel: socket.socket,
        basis: tuple[int, int, int] | None = None,
        wake_fd: int | None = None,
    ) -> None:
        super().__init__(limits)
        self.board = board
        self.channel = channel
        self._waiting: collections.deque[tuple[int, bytes]] = collections.deque()
        self._wake = wake_fd
        self._engines = EngineExits()
        self._basis_at = 0
        self._basis: mmap.mmap | None = None
        if basis is not None:  # the bytes the answers follow (serve/probeboard.py): read at each probe
            fd, self._basis_at, size = basis
            self._basis = mmap.mmap(fd, self._basis_at + size, access=mmap.ACCESS_READ)
            os.close(fd)

    def response(self, probe: Probe) -> bytes | None:
        now = b"" if self._basis is None else self._basis[self._basis_at :]
        answer, engines = self.board.read(probe.path, probe.close, now)
        if answer is not None and engines and self._engines.gone(engines):
            answer = None  # built while an engine now gone was alive: the loop sees its death
        if answer is None and self._wake is not None:  # the loop answers this one; fresh bytes for the next
            with contextlib.suppress(OSError):  # full: a wake-up is pending already; or the front is gone
                os.write(self._wake, b"w")
        return answer

    def give(self, fd: int, preread: bytes, head_s: float) -> None:
        self._waiting.append((fd, HEAD_S.pack(head_s) + preread))
        self._send_waiting()

    def front_connections(self) -> int:
        return self.board.front_connections()

    def held(self) -> int:
        """The connections being read and those not yet taken by the front: both are the door's."""
        return super().held() + len(self._waiting)

    def held_changed(self) -> None:
        self.board.set_door_held(self.held())

    def channel_event(self) -> None:
        """The channel is readable (its end: the front closed it or died) or writable again."""
        try:
            if self.channel.recv(1) == b"":
                self.stopping = True
                return
        except BlockingIOError:
            pass
        except OSError:
            self.stopping = True
            return
        self._send_waiting()

    def _send_waiting(self) -> None:
        while self._waiting:
            fd, message = self._waiting[0]
            try:
                socket.send_fds(self.channel, [message], [fd])
            except BlockingIOError:
                break
            except OSError as err:  # the front is gone: nothing can take the connection
                log.warning("probe door: a connection could not be handed to the front: %s", err)
                self.stopping = True
                return
            self._waiting.popleft()
            os.close(fd)
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self._waiting else 0)
        self._sel.modify(self.channel.fileno(), events, self.channel_event)
        self.held_changed()

    def close_all(self) -> None:
        for fd, _ in self._waiting:
            os.close(fd)
        self._waiting.clear()
        super().close_all()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    cfg = json.loads(argv[1])
    logsetup.setup(cfg["log_format"])
    shortslice.ask()  # woken by a connection, run sooner (serve/shortslice.py)
    limits = DoorLimits(cfg["header_timeout_s"], cfg["most_connections"], cfg["keep_alive_s"])
    board = ProbeBoard(cfg["board_fd"])
    channel = socket.socket(fileno=cfg["channel_fd"])
    channel.setblocking(False)
    basis = cfg.get("basis")
    span = None if basis is None else (basis[0], basis[1], basis[2])
    door = ChildDoor(limits, board, channel, span, cfg.get("wake_fd"))
    os.set_blocking(cfg["listen_fd"], False)
    door.listen(cfg["listen_fd"])
    door.watch(channel.fileno(), door.channel_event)
    try:
        door.run()
    finally:
        door.close_all()
        os.close(cfg["listen_fd"])
        channel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
