"""The loop watchdog (serve/watchdog.py) on a real event loop blocked for real: its thread sees the
stall the loop cannot, logs the loop's stack once, reports the stall for as long again after it ends,
then clears; and the same rules tick by tick with a test clock."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from neuronserve.serve.watchdog import BEAT_S, LoopWatchdog


def test_a_blocked_loop_is_seen_from_the_thread_and_reported_after(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = LoopWatchdog(1.0)
    seen: list[str | None] = []

    def block_the_loop() -> None:
        time.sleep(2.5)  # a synchronous call on the loop: nothing else runs meanwhile

    async def run() -> None:
        watchdog.start(asyncio.get_running_loop())
        await asyncio.sleep(0.6)
        seen.append(watchdog.verdict())  # on time
        block_the_loop()
        seen.append(watchdog.verdict())  # read as the loop runs again: the thread saw the stall
        await asyncio.sleep(0.3)
        seen.append(watchdog.verdict())  # the stall is over but still reported
        await asyncio.sleep(1.5)
        seen.append(watchdog.verdict())  # reported for as long as the bound, then clear

    with caplog.at_level(logging.WARNING, logger="neuronserve.serve"):
        try:
            asyncio.run(run())
        finally:
            watchdog.stop()
    on_time, during, after, later = seen
    assert on_time is None
    assert during is not None and during.startswith("the event loop has not run for ")
    assert during.endswith("(NEURONSERVE_LIVE_LOOP_STALL_S=1)")
    assert after is not None and after.startswith("the event loop stalled for ")
    assert later is None
    stacks = [r.getMessage() for r in caplog.records if "its stack" in r.getMessage()]
    assert len(stacks) == 1 and "block_the_loop" in stacks[0]  # what blocked it, once


class Clock:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


def test_tick_by_tick_with_a_test_clock() -> None:
    clock = Clock()
    watchdog = LoopWatchdog(10.0, clock=clock)  # not started: the test beats and ticks
    clock.t += BEAT_S + 10.0
    watchdog.tick()
    assert watchdog.verdict() is None  # exactly the bound late: not a stall yet
    clock.t += 2.0
    watchdog.tick()
    assert watchdog.verdict() == "the event loop has not run for 12.0 s (NEURONSERVE_LIVE_LOOP_STALL_S=10)"
    watchdog._beat_now()  # the loop runs again (no loop given: stamps the clock only)
    watchdog.tick()
    assert watchdog.verdict() == "the event loop stalled for 12.0 s (NEURONSERVE_LIVE_LOOP_STALL_S=10)"
    clock.t += 9.9
    watchdog._beat_now()
    watchdog.tick()
    assert watchdog.verdict() is not None
    clock.t += 0.2
    watchdog._beat_now()
    watchdog.tick()
    assert watchdog.verdict() is None


def test_a_bound_of_0_never_watches() -> None:
    watchdog = LoopWatchdog(0.0)

    async def run() -> None:
        watchdog.start(asyncio.get_running_loop())
        time.sleep(0.5)

    asyncio.run(run())
    watchdog.stop()
    assert watchdog.verdict() is None and watchdog._thread is None
