"""Supervise the engine process: start it in its own process group, stream its log, stop it cleanly.

Why a process group: vLLM forks workers; SIGTERM/SIGKILL to the group reaches all of them, so a stop
never leaves an orphan holding the device (or 3 GB of RAM on the CPU). The last log lines are kept in a
ring buffer so that an engine death can be explained in one message when the server exits.
"""

from __future__ import annotations

import collections
import contextlib
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
        self._pump = threading.Thread(target=self._pump_log, name=f"{self._label}-log", daemon=True)
        self._pump.start()

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
        assert self._proc is not None and self._proc.stdout is not None
        for raw in self._proc.stdout:
            line = redact_text(raw.decode("utf-8", "replace").rstrip("\n"), self._secrets)
            self._tail.append(line)
            if _QUIET in line:
                continue  # our own health polls, twice a second: kept in the tail, not printed
            try:
                self._out.write(engine_line(line, self._label))
                self._out.flush()
            except (OSError, ValueError):
                pass

    def returncode(self) -> int | None:
        """None while running (cheap: a non-blocking waitpid)."""
        return None if self._proc is None else self._proc.poll()

    def last_lines(self, n: int = 40) -> list[str]:
        if self._pump is not None:
            self._pump.join(timeout=1.0)  # let the pump drain what the dead process wrote
        return list(self._tail)[-n:]

    def stop(self, grace_s: float = 10.0) -> int | None:
        """SIGTERM the group, SIGKILL it after `grace_s`; returns the exit code."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        # Workers may outlive the main process: always sweep the group.
        self._signal_group(signal.SIGKILL)
        try:
            return proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            return None

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)
