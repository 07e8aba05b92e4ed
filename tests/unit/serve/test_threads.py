"""in_daemon_thread (serve/threads.py): the result or the exception arrives on the loop, the thread is a
daemon (a stop never waits for it), and it is named for what it does."""

from __future__ import annotations

import asyncio
import threading

import pytest

from neuronserve.serve.threads import in_daemon_thread


def test_result_exception_and_thread_kind() -> None:
    seen: list[threading.Thread] = []

    def work(x: int) -> int:
        seen.append(threading.current_thread())
        return x * 2

    def fail() -> None:
        raise KeyError("boom")

    async def run() -> int:
        assert await in_daemon_thread(work, 21, name="publish") == 42
        with pytest.raises(KeyError, match="boom"):
            await in_daemon_thread(fail)
        return 0

    asyncio.run(run())
    assert seen[0].daemon and seen[0].name == "publish" and seen[0] is not threading.main_thread()


def test_an_abandoned_thread_does_not_hold_the_loop() -> None:
    release = threading.Event()

    async def run() -> bool:
        pending = in_daemon_thread(release.wait, 30)
        await asyncio.sleep(0.05)
        return pending.done()

    assert asyncio.run(run()) is False  # the loop closed without waiting for the thread
    release.set()
