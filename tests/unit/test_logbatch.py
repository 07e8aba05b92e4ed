"""logbatch.BatchHandler: INFO lines logged on an event loop go out together, one write at most
FLUSH_S after the first; warnings, lines from threads without a loop and lines outside any loop go
out at once, with what was kept before them, in order."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator

import pytest

from neuronserve import logbatch, logsetup


class Sink:
    """A stream that records each write (what a system call would carry) and each flush."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.flushes = 0

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        self.flushes += 1

    @property
    def lines(self) -> list[str]:
        return "".join(self.writes).splitlines()


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, Sink]]:
    sink = Sink()
    handler = logbatch.BatchHandler(sink)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log = logging.getLogger("neuronserve.test_turn")
    log.propagate = False
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    yield log, sink
    log.removeHandler(handler)
    log.propagate = True


def test_lines_logged_on_the_loop_are_written_together(logged: tuple[logging.Logger, Sink]) -> None:
    log, sink = logged

    async def main() -> tuple[list[str], list[str]]:
        for i in range(3):
            log.info("request %d", i)
            await asyncio.sleep(0)  # other turns of the loop run: the lines are still kept
        kept = list(sink.writes)
        log.info("request 3")
        await asyncio.sleep(logbatch.FLUSH_S * 3)  # the timer ran
        written = list(sink.writes)
        return kept, written

    kept, written = asyncio.run(main())
    assert kept == []
    assert written == ["".join(f"INFO request {i}\n" for i in range(4))]  # one write, in order


def test_a_warning_goes_out_at_once_with_the_lines_before_it(logged: tuple[logging.Logger, Sink]) -> None:
    log, sink = logged

    async def main() -> list[str]:
        log.info("first")
        log.warning("trouble")
        at_warning = list(sink.lines)
        log.info("after")
        await asyncio.sleep(logbatch.FLUSH_S * 3)
        return at_warning

    assert asyncio.run(main()) == ["INFO first", "WARNING trouble"]
    assert sink.lines == ["INFO first", "WARNING trouble", "INFO after"]


def test_without_a_running_loop_each_line_is_written_at_once(logged: tuple[logging.Logger, Sink]) -> None:
    log, sink = logged
    log.info("start-up")
    assert sink.lines == ["INFO start-up"]
    done = threading.Event()

    def other() -> None:
        log.info("from a thread")
        done.set()

    threading.Thread(target=other).start()
    assert done.wait(5)
    assert sink.lines == ["INFO start-up", "INFO from a thread"]


def test_a_thread_line_carries_out_what_the_loop_kept_in_order(logged: tuple[logging.Logger, Sink]) -> None:
    log, sink = logged

    async def main() -> list[str]:
        log.info("loop line")
        t = threading.Thread(target=lambda: log.info("thread line"))
        t.start()
        t.join()  # the loop's timer has not run yet
        return list(sink.lines)

    assert asyncio.run(main()) == ["INFO loop line", "INFO thread line"]


def test_more_than_the_cap_is_written_before_the_timer(logged: tuple[logging.Logger, Sink]) -> None:
    log, sink = logged

    async def main() -> int:
        for _ in range(logbatch.MAX_BUFFERED // 100 + 10):
            log.info("x" * 100)
        return len(sink.writes)

    assert asyncio.run(main()) >= 1
    assert max(len(w) for w in sink.writes) <= logbatch.MAX_BUFFERED + 200


def test_shutdown_flushes_what_is_kept(logged: tuple[logging.Logger, Sink]) -> None:
    log, sink = logged
    handler = log.handlers[0]

    async def main() -> None:
        log.info("kept")
        handler.flush()  # what logging.shutdown does at exit, before the timer ran

    asyncio.run(main())
    assert sink.lines == ["INFO kept"]


def test_a_closed_stream_is_not_an_error(logged: tuple[logging.Logger, Sink]) -> None:
    log, sink = logged

    def broken(_: str) -> int:
        raise ValueError("I/O operation on closed file")

    sink.write = broken  # type: ignore[method-assign]
    log.warning("nowhere to go")  # no exception reaches the caller


def test_a_loop_closed_before_its_timer_ran_holds_nothing_back(logged: tuple[logging.Logger, Sink]) -> None:
    """A loop closed with the write still scheduled: the next line (here outside any loop) writes
    what was kept, and a new loop's lines are kept and written as before."""
    log, sink = logged
    loop = asyncio.new_event_loop()
    loop.call_soon(lambda: log.info("in the old loop"))
    loop.call_soon(loop.stop)
    loop.run_forever()  # stops at once: the timer's write never runs
    loop.close()
    assert sink.writes == []
    log.info("no loop")  # written at once, with what was kept
    assert sink.lines == ["INFO in the old loop", "INFO no loop"]

    async def main() -> int:
        log.info("new loop")
        await asyncio.sleep(logbatch.FLUSH_S * 3)
        return len(sink.writes)

    assert asyncio.run(main()) == 2  # kept, then written by the new loop's timer
    assert sink.lines[-1] == "INFO new loop"


def test_the_last_words_come_after_every_kept_line(capsys: pytest.CaptureFixture[str]) -> None:
    """logsetup.fatal writes what the handlers keep before it speaks: an INFO line logged on the loop
    just before a fatal error is not written after the error (tests/integration/serve/test_lifecycle.py
    reads the last words as the log's last line)."""
    logsetup.setup("text")
    try:

        async def main() -> None:
            logging.getLogger("neuronserve.front").info("phase READY -> FAILED")
            logsetup.fatal("the engine exited with code -9")

        asyncio.run(main())
        out, err = capsys.readouterr()
        assert "phase READY -> FAILED" in out  # written before the last words, not at exit
        assert "the engine exited with code -9" in err
    finally:
        logsetup.setup("text")
