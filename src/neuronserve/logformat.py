"""The serve's two log formats: plain text (the default) or one JSON object per line
(NEURONSERVE_LOG_FORMAT=json), the message escaped in both (logtext.py).

Why JSON: CloudWatch Logs Insights (and most log stores) query JSON fields directly (`status`,
`latency_ms`, `request_id`), where text lines need a parse pattern per message.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

from neuronserve.logtext import escape, escape_value

# Fields the access log passes with `extra=`; copied into the JSON object when present.
EXTRA_FIELDS = ("request_id", "route", "method", "status", "latency_ms", "tokens")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class TextFormatter(logging.Formatter):
    """The text format, with the message escaped (a traceback after it stays multi-line: it is ours)."""

    _second: tuple[int, str] = (-1, "")  # the last whole second formatted, and its text

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape(record.message)
        return super().formatMessage(record)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """logging.Formatter's own text, its seconds formatted once per second (an access line a
        request: a strftime each was a measurable part of the line's cost)."""
        if datefmt is not None or self.default_msec_format is None:
            return super().formatTime(record, datefmt)
        whole = int(record.created)
        second, text = self._second
        if whole != second:
            text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (whole, text)
        return self.default_msec_format % (text, record.msecs)


_iso_second: list[tuple[int, str]] = [(-1, "")]  # the last whole second of iso(), and its text


def iso(created: float) -> str:
    """`2026-11-27T16:30:11.123Z`, as datetime writes it (microseconds rounded half to even, then
    cut to milliseconds); the seconds' text made once per second."""
    whole = int(created)
    micro = round((created - whole) * 1e6)
    if micro >= 1_000_000:
        whole, micro = whole + 1, micro - 1_000_000
    second, text = _iso_second[0]
    if whole != second:
        text = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _iso_second[0] = (whole, text)
    return f"{text}.{micro // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "time": iso(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": escape(record.getMessage()),
        }
        for name in EXTRA_FIELDS:
            if name in record.__dict__:
                obj[name] = escape_value(record.__dict__[name])
        if record.exc_info:
            obj["exception"] = self.formatException(record.exc_info)
        return json.dumps(obj, default=str)
