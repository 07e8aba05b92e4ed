"""logbatch.info_line: the access line written without a LogRecord is the line logging writes, byte for
byte, in both formats; anything but the serve's own set-up gets the record through logging."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronserve import logbatch, logsetup

LOGGER = logging.getLogger("neuronserve.access")


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    LOGGER.setLevel(logging.NOTSET)
    LOGGER.filters.clear()
    logsetup.setup("text")


def _sink(fmt: str, monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    logsetup.setup(fmt)  # its handler writes to `out`
    return out


def _both(message: str, extra: dict[str, Any], fmt: str) -> tuple[str, str]:
    """(what logging writes, what info_line writes) for the same line at the same instant."""
    with pytest.MonkeyPatch.context() as frozen:
        out = _sink(fmt, frozen)
        now = 1_764_000_000.0 + (hash(message) % 997) / 1000.0 + 0.0004
        frozen.setattr(time, "time", lambda: now)  # the record's clock and info_line's
        LOGGER.info("%s", message, extra=dict(extra))
        logged = out.getvalue()
        logbatch.info_line(LOGGER, message, extra)
    return logged, out.getvalue()[len(logged) :]


EXTRA = st.fixed_dictionaries(
    {
        "request_id": st.text(max_size=20),
        "route": st.sampled_from(["/invocations", "/v1/completions", "other"]),
        "method": st.one_of(st.none(), st.text(max_size=8)),
        "status": st.integers(100, 599),
        "latency_ms": st.floats(0, 1e6, allow_nan=False),
        "tokens": st.fixed_dictionaries(
            {"prompt": st.one_of(st.none(), st.integers(0, 10**6), st.text(max_size=5))}
        ),
    }
)


@pytest.mark.parametrize("fmt", ["text", "json"])
@settings(max_examples=150, deadline=None)
@given(message=st.text(max_size=200), extra=EXTRA)
def test_the_line_is_the_one_logging_writes(fmt: str, message: str, extra: dict[str, Any]) -> None:
    logged, direct = _both(message, extra, fmt)
    assert direct == logged
    assert direct.count("\n") == 1  # control characters escaped: one line


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_an_access_line_as_the_gate_writes_it(fmt: str) -> None:
    message = "POST /x%20status=200 status=200 latency_ms=1.5 tokens_in=3 tokens_out=- request_id=r1"
    extra = {"request_id": "r1", "route": "other", "method": "POST", "status": 200, "latency_ms": 1.5}
    logged, direct = _both(message, {**extra, "tokens": {"prompt": 3, "completion": None}}, fmt)
    assert direct == logged
    if fmt == "json":
        assert json.loads(direct)["status"] == 200


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_another_handler_gets_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler someone added (a test's capture, a shipper) sees the line as a record, with its
    fields; ours still writes it once."""
    out = _sink("text", monkeypatch)
    kept = _Kept()
    logging.getLogger().addHandler(kept)
    logbatch.info_line(LOGGER, "GET /x status=200", {"request_id": "r9", "status": 200})
    assert [(r.getMessage(), r.__dict__["request_id"]) for r in kept.records] == [("GET /x status=200", "r9")]
    assert out.getvalue().count("GET /x status=200") == 1


def test_a_filter_or_a_level_is_obeyed(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _sink("text", monkeypatch)
    LOGGER.addFilter(lambda record: "secret" not in record.getMessage())
    logbatch.info_line(LOGGER, "GET /secret status=200", {})
    logbatch.info_line(LOGGER, "GET /open status=200", {})
    LOGGER.filters.clear()
    LOGGER.setLevel(logging.WARNING)
    logbatch.info_line(LOGGER, "GET /quiet status=200", {})
    assert out.getvalue().count("status=200") == 1 and "/open" in out.getvalue()


def test_lines_keep_their_order_with_logging_lines_in_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """On an event loop the direct line joins the same batch as logging's lines, in the order logged."""
    out = _sink("text", monkeypatch)

    async def main() -> str:
        for i in range(3):
            logging.getLogger("neuronserve.front").info("before %d", i)
            logbatch.info_line(LOGGER, f"access {i}", {})
        held = out.getvalue()  # nothing written yet: batched
        await asyncio.sleep(logbatch.FLUSH_S * 3)
        return held

    held = asyncio.run(main())
    assert held == ""
    lines = [line.split(": ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines == ["before 0", "access 0", "before 1", "access 1", "before 2", "access 2"]
