"""The event loop's watchdog: a thread that sees a stall the stalled loop cannot see itself.

Why a thread: /live is answered by the event loop, so a loop that is blocked (a synchronous call that
never returns, a log write into a full pipe, a bug that spins) answers nothing, and once it runs again
it has no memory of having stopped. The loop beats every BEAT_S (a timer callback stamping the clock);
the thread looks every TICK_S at how late the beat is. Later than NEURONSERVE_LIVE_LOOP_STALL_S past
its due time is a stall: the thread keeps the verdict /live answers with (front/state.py `live`), logs
the loop thread's stack once per stall (what blocked it), and keeps reporting the stall for as long
again after the loop runs again, so the probes that waited through it are answered 503, not 200.

Reading the verdict is one attribute read (a str or None, replaced whole by the thread): /live stays
as cheap as /ping. The engine's own watchdog (engine/process.py) is another thing: a process that
kills the engine when the front dies.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable

log = logging.getLogger("neuronserve.serve")

BEAT_S = 0.25
TICK_S = 0.25
STACK_FRAMES = 12  # of the loop thread's stack, logged once per stall


class LoopWatchdog:
    """Watches one event loop; `verdict()` is None while it runs on time, else why it is wedged."""

    def __init__(self, stall_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_s = stall_s  # 0 = off: never a verdict
        self._clock = clock
        self._beat = clock()
        self._verdict: str | None = None
        self._stalled_from: float | None = None  # the due time of the beat that came late
        self._reported_until = 0.0  # a stall that ended is reported until then
        self._last_stall = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def verdict(self) -> str | None:
        return self._verdict

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """From the loop's own thread: the first beat, then the watching thread (nothing when off)."""
        if not self.stall_s:
            return
        self._loop, self._loop_thread = loop, threading.get_ident()
        self._beat_now()
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def _beat_now(self) -> None:
        self._beat = self._clock()
        if self._loop is not None and not self._stop.is_set():
            self._handle = self._loop.call_later(BEAT_S, self._beat_now)

    def _watch(self) -> None:
        while not self._stop.wait(TICK_S):
            self.tick()

    def tick(self) -> None:
        """One look at the beat (the thread's loop; tests call it with their own clock)."""
        now = self._clock()
        due = self._beat + BEAT_S
        late = now - due
        bound = self.stall_s
        setting = f"NEURONSERVE_LIVE_LOOP_STALL_S={bound:g}"
        if late > bound:
            if self._stalled_from is None:
                self._stalled_from = due
                log.warning("the event loop has not run for %.1f s; its stack:\n%s", late, self._stack())
            self._verdict = f"the event loop has not run for {late:.1f} s ({setting})"
            return
        if self._stalled_from is not None:  # it runs again: the stall lasted from its due time to the beat
            lasted = self._beat - self._stalled_from
            self._stalled_from = None
            self._reported_until = now + bound
            self._last_stall = f"the event loop stalled for {lasted:.1f} s ({setting})"
            log.warning("%s; it runs again", self._last_stall)
        self._verdict = self._last_stall if now < self._reported_until else None

    def _stack(self) -> str:
        frame = sys._current_frames().get(self._loop_thread or -1)
        if frame is None:
            return "  (not available)"
        return "".join(traceback.format_stack(frame)[-STACK_FRAMES:]).rstrip()
