"""stage/progress.py: one Progress value feeds the log line, the bar and the callback; the counter takes
bytes from many threads and, fed totals, never goes back."""

from __future__ import annotations

import logging
import threading

import pytest

from neuronserve.stage.progress import MIB, ProgressMeter, format_progress
from neuronserve.types import Progress


def test_the_line_says_percent_bytes_rate_and_eta() -> None:
    line = format_progress(Progress("model s3://b/m/", 3 * MIB, 4 * MIB, 1.5 * MIB, 0.6))
    assert line == "model s3://b/m/:  75.0% 3.0/4.0 MiB, 1.5 MiB/s, ETA 1s"
    unknown = format_progress(Progress("extract a.tar.gz", MIB, None, 0.0, None))
    assert unknown == "extract a.tar.gz:   ?   1.0/? MiB, 0.0 MiB/s, ETA ?"


def test_bytes_from_many_threads_are_all_counted_and_totals_never_go_back() -> None:
    seen: list[Progress] = []
    with ProgressMeter("w", 8000 * 4, seen.append, interval=60, tty=False) as meter:
        workers = [threading.Thread(target=lambda: [meter.add(4) for _ in range(1000)]) for _ in range(8)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert meter.snapshot().done_bytes == 32_000
        meter.set(10)  # an engine that reports totals: a smaller one is older news
        assert meter.snapshot().done_bytes == 32_000
        meter.set(40_000)
    assert seen[0].done_bytes == 0  # reported on entry
    assert seen[-1].done_bytes == 40_000  # and once more on a clean exit
    assert seen[-1].percent == pytest.approx(125.0)


def test_a_clean_exit_logs_the_final_line_and_a_failed_one_does_not(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="neuronserve.stage"):
        with ProgressMeter("ok", 10, interval=60, tty=False) as meter:
            meter.add(10)
        with pytest.raises(RuntimeError), ProgressMeter("failed", 10, interval=60, tty=False):
            raise RuntimeError("download broke")
    assert "ok: 100.0%" in caplog.text
    assert "failed:" not in caplog.text


def test_the_ticker_reports_while_the_bytes_arrive() -> None:
    seen: list[Progress] = []
    ticked = threading.Event()

    def callback(p: Progress) -> None:
        seen.append(p)
        if len(seen) >= 3:
            ticked.set()

    with ProgressMeter("slow", None, callback, interval=0.01, tty=False) as meter:
        meter.add(5)
        assert ticked.wait(5)
    assert seen[1].done_bytes == 5 and seen[1].total_bytes is None and seen[1].eta_s is None
