"""The probe door as a process of its own (NEURONSERVE_PROBE_DOOR=process): the front's side.

Why a process: the door's thread (serve/probedoor.py) answers a probe without waiting for the event
loop, but it still needs the GIL, which the busy loop's thread holds; each probe waits for it to be
handed over (a switch interval, then a core for the thread). Measured with the front saturated on
this 2-core machine (bench/bench_ceiling.py's prober, a new connection every 25 ms), the thread's
p99 was 4.0-7.1 ms; a door in its own process, with no GIL to share, measured 2.5-4.6 ms in the same
conditions (docs/PERFORMANCE.md, "`/ping` from the door's process").

What runs where:
- the door's process (serve/doorchild.py) is the only acceptor of the listening socket; it answers
  whole probe heads with the bytes published here, and sends every other connection back over a Unix
  socket (the descriptor, the bytes read so far, the header deadline left), which this side adopts
  into uvicorn's protocol exactly as the thread door does (serve/probedoor.py `adopt`);
- this side builds /ping's and /live's answers from the front's state (the route's own bytes:
  serve/probedoor.py `probe_bytes`), with the loop's connection count, into shared memory
  (serve/probeboard.py): at once in the thread that changes what they answer (a phase move, the
  engine's health: front/state.py `on_change`), at once when an engine's main process exits (the
  publishing thread waits on their pidfds: the routes see that death through a waitpid at once, and
  the door must not answer 200 meanwhile), and every PUBLISH_S, for what changes without telling
  (the date header, the loop's connection count, the clocks behind /live's verdicts);
- the answers are published with the engines' pids they were built with alive; the door's process
  follows those processes (pidfds, serve/engineexits.py) and hands a probe to the loop once one has
  exited, so the door never answers from before an engine's death that the routes already see;
- a front worker's state is the supervisor's, which changes in another process (front/statemirror.py):
  its answers are published with the board's bytes they followed (their basis), and the door's
  process uses them only while those bytes are unchanged, else it hands the probe to the worker's
  loop, which reads the board as it is. So two workers never disagree about a phase, engine health
  or liveness the supervisor wrote: once one answered from the new bytes, every door finds its own
  answers' basis changed (tests/integration/serve/test_worker.py, the fatal engine death);
- a front that stops publishing (its whole process stuck) has its probes handed to the loop after
  probeboard.STALE_S, which answers them when it can, as without a door.
- the connection bound counts the door's connections (published by the door) with the loop's.

If the door's process exits while the front runs (killed, say), the front logs it and carries on
with the thread door on the same listening socket, which it kept: connections queued meanwhile wait
in the kernel's backlog, none is refused. At shutdown the front closes the Unix socket; the door's
process closes what it holds and exits (a door never outlives its front: it exits as well when the
front dies, since the kernel closes that socket).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import subprocess
import sys
import threading

from neuronserve import logsetup
from neuronserve.front.state import ServerState
from neuronserve.redact import is_secret_name
from neuronserve.serve.connections import ConnectionLimits
from neuronserve.serve.doorchild import HEAD_S
from neuronserve.serve.doorcore import READ_BYTES
from neuronserve.serve.engineexits import EngineExits
from neuronserve.serve.probeboard import ANSWERS, ProbeBoard
from neuronserve.serve.probedoor import DoorLoop, Headers, ProbeDoor, adopt, door_limits, probe_bytes

log = logging.getLogger("neuronserve.serve")

PUBLISH_S = 0.05
STOP_WAIT_S = 5.0
# a hand-off: 8 bytes, then the bytes read: under READ_BYTES before the last read, which adds at most
# READ_BYTES (serve/doorcore.py `classify` hands a head on once READ_BYTES are read)
MESSAGE_BYTES = 2 * READ_BYTES + 1024
TAKE_BATCH = 64  # hand-offs taken per wake-up of the loop


class ProcessDoor:
    """The same interface as ProbeDoor (held, start, stop), with the door in a process of its own."""

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
        self.board: ProbeBoard | None = None  # made at start
        self.proc: subprocess.Popen[bytes] | None = None
        self.fallback: ProbeDoor | None = None
        self._side: DoorLoop | None = None
        self._sock: socket.socket | None = None
        self._channel: socket.socket | None = None
        self._stop = threading.Event()
        self._publisher: threading.Thread | None = None
        # one publication at a time, built and written whole: a round of the publishing thread that
        # built its answers before a change cannot write them after the change's own
        self._publishing = threading.Lock()
        self._span = state.shared_span()
        # made at start: the door's process writes a byte to the pipe when it found no answer it may
        # use (a basis changed); the publishing thread wakes and publishes at once, not at its next round
        self._wake: tuple[int, int] | None = None

    def held(self) -> int:
        if self.fallback is not None:
            return self.fallback.held()
        # after stop, the page is gone: a connection the loop adopts during its shutdown counts its own
        return self.board.door_held() if self.board is not None else 0

    def start(self, sock: socket.socket, side: DoorLoop) -> None:
        self._sock, self._side = sock, side
        self.board = board = ProbeBoard.create()
        self._wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        wake_w = self._wake[1]
        self.publish()
        self.state.on_change(self._changed)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        door = door_limits(self.limits, self.keep_alive_s)
        cfg = {
            "listen_fd": sock.fileno(),
            "channel_fd": theirs.fileno(),
            "board_fd": board.fd,
            "header_timeout_s": door.header_timeout_s,
            "most_connections": door.most_connections,
            "keep_alive_s": door.keep_alive_s,
            "log_format": logsetup.current_format(),
            "basis": self._span,
            "wake_fd": wake_w,
        }
        fds = [sock.fileno(), theirs.fileno(), board.fd, wake_w]
        fds += [] if self._span is None else [self._span[0]]
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "neuronserve.serve.doorchild", json.dumps(cfg)],
                pass_fds=fds,
                stdin=subprocess.DEVNULL,
                env={k: v for k, v in os.environ.items() if not is_secret_name(k)},  # it needs none
            )
        except OSError as err:  # no process to be had (EMFILE, ENOMEM, EAGAIN): the thread door
            log.warning(
                "probe door: no process of its own (%s); a thread of the front answers the probes", err
            )
            ours.close()
            theirs.close()
            self._thread_door()
            return
        theirs.close()
        ours.setblocking(False)
        self._channel = ours
        side.loop.add_reader(ours.fileno(), self._take)
        self._publisher = threading.Thread(target=self._publish_loop, name="probe-publisher", daemon=True)
        self._publisher.start()
        log.info("probe door: process %d answers /ping and /live", self.proc.pid)

    def publish(self) -> list[int]:
        """The probes' answers now, the basis they follow and the loop's connection count, for the door's
        process; returns the engines' pids published with them. The basis is read before the answers
        are built: bytes changed meanwhile make the door hand probes to the loop until the next
        publication, never answer from older bytes."""
        side, board = self._side, self.board
        assert side is not None and board is not None
        with self._publishing:
            if self._stop.is_set():
                return []
            basis = self.state.shared_basis()
            engines = self.state.engine_pids()  # alive now; read before the answers, as the basis
            default = side.default_headers()
            answers = [
                probe_bytes(self.state, path, default, self.extra_headers, close) for path, close in ANSWERS
            ]
            if not board.publish(answers, side.connections(), basis, engines):
                log.warning(
                    "probe door: the probes' answers do not fit the shared page; the loop answers them"
                )
            return engines

    def _changed(self) -> None:
        """The state changed what the probes answer: publish now, in the thread that changed it."""
        try:
            self.publish()
        except Exception:  # the state mid-change: the publishing thread's next round publishes
            log.debug("probe door: answers not published at a change", exc_info=True)

    def _publish_loop(self) -> None:
        assert self._wake is not None
        wake_r = self._wake[0]
        engines = EngineExits()
        published: list[int] = []  # the engines the last publication was built with alive
        try:
            while not self._stop.is_set():
                engines.follow(published)
                woken, _, _ = select.select([wake_r, *engines.fds()], [], [], PUBLISH_S)
                if wake_r in woken:
                    with contextlib.suppress(OSError):
                        os.read(wake_r, 4096)
                engines.exited(woken)
                try:
                    published = self.publish()
                except Exception:  # the state mid-change: the next round publishes
                    log.debug("probe door: answers not published this round", exc_info=True)
        finally:
            engines.close()

    def _take(self) -> None:
        """In the loop: adopt the connections the door's process sent; at the channel's end, fall back."""
        channel, side = self._channel, self._side
        assert channel is not None and side is not None
        for _ in range(TAKE_BATCH):
            try:
                message, fds, flags, _addr = socket.recv_fds(channel, MESSAGE_BYTES, 4)
            except BlockingIOError:
                return
            except OSError as err:
                log.warning("probe door: its channel failed: %s", err)
                message, fds = b"", []
            if not message and not fds:
                self._door_gone()
                return
            for extra in fds[1:]:
                socket.socket(fileno=extra).close()
            if fds and flags & socket.MSG_TRUNC:  # never a connection with bytes missing
                log.warning("probe door: a hand-off over %d bytes; the connection is closed", MESSAGE_BYTES)
                socket.socket(fileno=fds[0]).close()
            elif fds and len(message) >= HEAD_S.size:
                (head_s,) = HEAD_S.unpack_from(message)
                adopt(side, fds[0], message[HEAD_S.size :], head_s)
            elif fds:
                socket.socket(fileno=fds[0]).close()

    def _door_gone(self) -> None:
        self._close_channel()
        if self._stop.is_set():
            return
        code = self.proc.poll() if self.proc is not None else None
        log.warning(
            "probe door: its process ended (exit %s); a thread of the front answers the probes from now on",
            code,
        )
        self._thread_door()

    def _thread_door(self) -> None:
        """The thread door on the same listening socket, in place of the process (not started, or gone)."""
        side, sock = self._side, self._sock
        assert side is not None and sock is not None
        self.fallback = ProbeDoor(self.state, self.limits, self.keep_alive_s, self.extra_headers)
        self.fallback.start(sock, side)

    def _close_channel(self) -> None:
        channel, side = self._channel, self._side
        if channel is None:
            return
        self._channel = None
        if side is not None:
            with contextlib.suppress(Exception):
                side.loop.remove_reader(channel.fileno())
        channel.close()

    def stop(self) -> None:
        """Stop accepting; the door's process closes what it holds and exits; the listening socket closed."""
        with self._publishing:
            self._stop.set()  # no publication after this (a phase move at shutdown would find no page)
        if self._wake is not None:
            with contextlib.suppress(OSError):
                os.write(self._wake[1], b"s")  # the publishing thread's wait ends now
        if self._publisher is not None:
            self._publisher.join(5.0)
        self._close_channel()
        if self.proc is not None:
            try:
                self.proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                log.warning(
                    "probe door: process %d did not stop in %.0f s: killed", self.proc.pid, STOP_WAIT_S
                )
                self.proc.kill()
                self.proc.wait()
        if self.fallback is not None:
            self.fallback.stop()  # closes the listening socket
        elif self._sock is not None:
            self._sock.close()
        if self.board is not None:
            self.board.close()
            self.board = None
        for fd in self._wake or ():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake = None
