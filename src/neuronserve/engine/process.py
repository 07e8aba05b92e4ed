"""Supervise the engine process: start it in its own process group, stream its log, stop it cleanly.

Why a process group: vLLM forks workers; SIGTERM/SIGKILL to the group reaches all of them, so a stop
never leaves an orphan holding the device (or 3 GB of RAM on the CPU). When the engine's main process
exits on its own, the group is swept at once (`returncode`): its EngineCore and workers die with it.
The last log lines are kept in a ring buffer so that an engine death can be explained in one message
when the server exits.

The engine dies with the front, even when the front is SIGKILLed (outside a container nothing else
would stop it: inside one, the container's end does). A watchdog does it: a tiny process started beside
each engine, in a session of its own, that blocks reading a pipe whose only writer is the front. The
kernel closes that pipe whatever way the front dies; the watchdog then SIGKILLs the engine's whole
process group. On an orderly stop the front writes one byte first and the watchdog exits quietly.
Why not only a parent-death signal (prctl PR_SET_PDEATHSIG): it reaches only the engine's main process
(vLLM's EngineCore and its workers, in the same group, would be orphaned and keep the device and the
memory), it fires when the *thread* that forked exits rather than the process, and setting it needs a
`preexec_fn`, which Python documents as unsafe in a process with threads (the front runs several).
The watchdog costs one small Python process (about 10 MB) per engine.

Why an orderly stop keeps the engine's last lines to itself: vLLM 0.32's own SIGTERM path shuts the
EngineCore down before it cancels the task that reads its outputs (AsyncLLM.shutdown,
vllm/v1/engine/async_llm.py), so about one clean stop in two printed an `AsyncLLM output_handler
failed ... EngineDeadError` traceback, whichever process got the signal first (measured with the group
signalled and with the API server alone). What an engine says after the front asked it to stop is kept
in the tail, and shown only when it then exits with an error (or must be killed).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import IO

from neuronserve.errors import EngineError
from neuronserve.logsetup import engine_line
from neuronserve.redact import redact_text, secret_values

LOG_LINES_KEPT = 100
READ_BYTES = 1 << 16  # one read of the engine's output pipe (_pump_log)
PIPE_BYTES = 1 << 20  # the pipe's capacity asked for (Linux F_SETPIPE_SZ; 64 KiB by default)
PACE_S = 0.05  # the pump's pause after each batch: lines gather in the pipe meanwhile
# The watchdog (see the module docstring): EOF on stdin (the front is gone) kills the engine's group;
# one byte (an orderly stop) ends it quietly. Only the standard library, `-S -E`: starts in ~20 ms.
_WATCHDOG = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "if not os.read(0, 1):\n"
    "    try:\n"
    "        os.killpg(int(sys.argv[1]), signal.SIGKILL)\n"
    "    except OSError:\n"
    "        pass\n"
)
_QUIET = '"GET /health HTTP/1.1" 200'


class EngineProcess:
    """One engine process. `start()` returns at once; the engine loads in the background."""

    def __init__(
        self,
        argv: tuple[str, ...],
        env: Mapping[str, str],
        work_dir: str,
        environ: Mapping[str, str],
        *,
        out: IO[str] | None = None,
        label: str = "engine",
        nice: int = 0,
    ) -> None:
        self._argv = argv
        self._work_dir = work_dir
        self._label = label
        self._nice = nice
        self._env = {**environ, **env}
        # The engine may echo its arguments or environment: scrub secret values from what we relay.
        self._secrets = secret_values(self._env)
        self._out = out if out is not None else sys.stdout
        self._proc: subprocess.Popen[bytes] | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=LOG_LINES_KEPT)
        self._pump: threading.Thread | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._watchdog_fd: int | None = None  # the pipe's write end: held by the front alone
        self._swept = False
        self._stopping = False  # an orderly stop began: its lines are kept, shown only if it fails
        self._unshown: collections.deque[str] = collections.deque(maxlen=LOG_LINES_KEPT)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        os.makedirs(self._work_dir, exist_ok=True)
        try:
            self._proc = subprocess.Popen(
                list(self._argv),
                env=self._env,
                cwd=self._work_dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as err:
            raise EngineError(f"cannot start the {self._label} ({self._argv[0]}): {err}") from err
        self._lower_priority(self._nice)
        self._start_watchdog(self._proc.pid)
        self._pump = threading.Thread(target=self._pump_log, name=f"{self._label}-log", daemon=True)
        self._pump.start()

    def _start_watchdog(self, pgid: int) -> None:
        """The process that kills the engine's group when the front dies (module docstring)."""
        read_fd, write_fd = os.pipe()  # not inheritable (PEP 446): no other child holds the write end
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-S", "-E", "-c", _WATCHDOG, str(pgid)],
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C or a group signal must not reach it
            )
        except OSError:
            os.close(write_fd)  # no watchdog: the engine still stops with an orderly stop
        else:
            self._watchdog_fd = write_fd
        finally:
            os.close(read_fd)

    def _dismiss_watchdog(self) -> None:
        """An orderly stop: the watchdog exits without killing (the group may be a new one by now)."""
        fd, self._watchdog_fd = self._watchdog_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, b"q")
            os.close(fd)
        if self._watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(timeout=2.0)

    @property
    def watchdog_pid(self) -> int | None:
        return self._watchdog.pid if self._watchdog is not None else None

    def _lower_priority(self, nice: int) -> None:
        """Run the engine below the front's priority (docs/RELIABILITY.md, "/ping under saturation").

        The engine busy-loops on every core while it generates; at equal priority the scheduler gives
        the front's event loop no precedence, and a health probe on a new connection waited seconds.
        Set right after the start, long before the engine forks its workers (they inherit it); a
        niceness only ever goes up without privileges, so this cannot fail for lack of rights.
        """
        if nice and self._proc is not None:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, self._proc.pid, os.getpriority(os.PRIO_PROCESS, 0) + nice)
            # The engine runs in its own session, and with sched_autogroup (on by default in many
            # kernels, on here) each session is scheduled as one group at equal share: a process's
            # nice then only ranks it inside its group. The group's own nice is what competes with
            # the front's group (sched(7), "The autogroup feature").
            with contextlib.suppress(OSError), open(f"/proc/{self._proc.pid}/autogroup", "w") as f:
                f.write(str(nice))

    def _pump_log(self) -> None:
        """Relay the engine's output, whole lines only, in batches.

        Why batches: vLLM prints an access line per request, and at thousands of requests a second a
        line at a time cost the front two system calls and a hand-over of the interpreter lock from
        its event loop per line (docs/PERFORMANCE.md, "Front ceiling"). One read takes what the pipe
        holds (up to READ_BYTES); its whole lines go out in one write. A line cut by a read waits
        for its end; the last one is relayed at EOF even without a newline. After a small batch the
        pump pauses PACE_S, so that at high rates a batch holds many lines (a line is at most that
        late; measured at 2,000 requests/s, 5 ms pauses still cost 14 us of the front's CPU per
        request in hand-overs of the interpreter lock, 50 ms under 1 us). The pipe is enlarged to
        PIPE_BYTES, so the engine does not wait on a full pipe meanwhile (20 MB/s of log lines would
        fill it in 50 ms; with the default 64 KiB, 1.3 MB/s)."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        with contextlib.suppress(OSError, AttributeError):  # Linux only; a smaller pipe still works
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        partial: list[bytes] = []  # the start of a line whose end has not arrived
        while True:
            try:
                data = os.read(fd, READ_BYTES)
            except OSError:
                break
            if not data:
                break
            end = data.rfind(b"\n")
            if end < 0:
                partial.append(data)
                continue
            whole = b"".join([*partial, data[:end]]) if partial else data[:end]
            partial = [data[end + 1 :]] if end + 1 < len(data) else []
            self._relay(whole)
            if len(data) < READ_BYTES // 2:  # the pipe had little: let more gather (else read on)
                time.sleep(PACE_S)
        if partial:
            self._relay(b"".join(partial))

    def _relay(self, whole: bytes) -> None:
        """Newline-separated lines: kept in the tail, printed unless quiet or held back by a stop."""
        out = []
        for line in redact_text(whole.decode("utf-8", "replace"), self._secrets).split("\n"):
            self._tail.append(line)
            if _QUIET in line:
                continue  # our own health polls, twice a second: kept in the tail, not printed
            if self._stopping:
                self._unshown.append(line)
                continue
            out.append(engine_line(line, self._label))
        if out:
            self._emit("".join(out))

    def _write(self, line: str) -> None:
        self._emit(engine_line(line, self._label))

    def _emit(self, text: str) -> None:
        try:
            self._out.write(text)
            self._out.flush()
        except (OSError, ValueError):
            pass

    def returncode(self) -> int | None:
        """None while running (cheap: a non-blocking waitpid). The first time the main process is
        seen dead, its group is swept: workers it left behind die now, not at the next stop."""
        if self._proc is None:
            return None
        rc = self._proc.poll()
        if rc is not None and not self._swept:
            self._swept = True
            self._signal_group(signal.SIGKILL)
        return rc

    def last_lines(self, n: int = 40) -> list[str]:
        if self._pump is not None:
            self._pump.join(timeout=1.0)  # let the pump drain what the dead process wrote
        return list(self._tail)[-n:]

    def stop(self, grace_s: float = 10.0) -> int | None:
        """SIGTERM the group, SIGKILL it after `grace_s`; returns the exit code."""
        proc = self._proc
        if proc is None:
            return None
        self._stopping = proc.poll() is None  # a dead engine's last words are never held back
        if self._stopping:
            self._signal_group(signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        # Workers may outlive the main process: always sweep the group.
        self._signal_group(signal.SIGKILL)
        self._swept = True
        try:
            rc: int | None = proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            self._dismiss_watchdog()
        if rc != 0:  # it failed to stop cleanly: what it said while stopping is the explanation
            if self._pump is not None:
                self._pump.join(timeout=1.0)
            for line in list(self._unshown):
                self._write(line)
        return rc

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)
