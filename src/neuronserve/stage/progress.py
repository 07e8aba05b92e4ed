"""Progress of one staging step: a thread-safe byte counter, a ticker that logs every few seconds.

The same `Progress` value feeds the log line (percent, MiB/s, ETA), the optional terminal bar and
the caller's callback (the /ping body while STAGING), so the three never disagree.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType

from neuronserve.types import Progress

log = logging.getLogger("neuronserve.stage")
MIB = 1024 * 1024


def format_progress(p: Progress) -> str:
    pct = f"{p.percent:5.1f}%" if p.percent is not None else "  ?  "
    total = f"{p.total_bytes / MIB:.1f}" if p.total_bytes else "?"
    eta = f"{p.eta_s:.0f}s" if p.eta_s is not None else "?"
    return f"{p.what}: {pct} {p.done_bytes / MIB:.1f}/{total} MiB, {p.rate_bps / MIB:.1f} MiB/s, ETA {eta}"


class ProgressMeter:
    """Counts bytes from many worker threads; reports every `interval` s until closed."""

    def __init__(
        self,
        what: str,
        total_bytes: int | None,
        callback: Callable[[Progress], None] | None = None,
        *,
        interval: float = 3.0,
        tty: bool | None = None,
    ) -> None:
        self.what = what
        self.total = total_bytes
        self._cb = callback
        self._interval = interval
        self._tty = sys.stderr.isatty() if tty is None else tty
        self._lock = threading.Lock()
        self._done = 0
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="stage-progress", daemon=True)

    def __enter__(self) -> ProgressMeter:
        self._thread.start()
        self.report(log_line=False)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if exc_type is None:
            self.report(log_line=True)
        if self._tty:
            sys.stderr.write("\n")

    def add(self, n: int) -> None:
        with self._lock:
            self._done += n

    def set(self, n: int) -> None:
        """For engines that observe totals rather than deltas (s5cmd: bytes on disk); never goes back."""
        with self._lock:
            self._done = max(self._done, n)

    def snapshot(self) -> Progress:
        with self._lock:
            done = self._done
        elapsed = max(time.monotonic() - self._start, 1e-6)
        rate = done / elapsed
        eta = (self.total - done) / rate if self.total and rate > 0 else None
        return Progress(self.what, done, self.total, rate, eta)

    def report(self, *, log_line: bool = True) -> None:
        p = self.snapshot()
        if self._cb is not None:
            self._cb(p)
        if self._tty:
            width = 30
            frac = min(1.0, (p.percent or 0.0) / 100.0)
            bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
            sys.stderr.write(f"\r[{bar}] {format_progress(p)}   ")
            sys.stderr.flush()
        elif log_line:
            log.info("%s", format_progress(p))

    def _tick(self) -> None:
        while not self._stop.wait(self._interval):
            self.report()
