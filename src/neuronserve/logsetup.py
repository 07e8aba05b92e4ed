"""Logging for `serve`: plain text (the default) or one JSON object per line (NEURONSERVE_LOG_FORMAT=json).

Why JSON: CloudWatch Logs Insights (and most log stores) query JSON fields directly (`status`,
`latency_ms`, `request_id`), where text lines need a parse pattern per message. The engine's own
lines are relayed, not re-parsed: each is wrapped as {"source": "engine", "message": ...} so the
stream stays one JSON object per line. Secrets are scrubbed before lines get here (redact.py).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from neuronserve.errors import ConfigError

FORMATS = ("text", "json")
# Fields the access log passes with `extra=`; copied into the JSON object when present.
EXTRA_FIELDS = ("request_id", "route", "method", "status", "latency_ms", "tokens")
_state = {"format": "text"}  # set once by setup(); read by the engine relay and fatal()


def parse_format(environ: Mapping[str, str]) -> str:
    raw = environ.get("NEURONSERVE_LOG_FORMAT", "").strip().lower() or "text"
    if raw not in FORMATS:
        raise ConfigError(
            f"NEURONSERVE_LOG_FORMAT={raw!r} is not a log format: use text or json",
            ("NEURONSERVE_LOG_FORMAT",),
        )
    return raw


def _iso(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "time": _iso(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in EXTRA_FIELDS:
            if name in record.__dict__:
                obj[name] = record.__dict__[name]
        if record.exc_info:
            obj["exception"] = self.formatException(record.exc_info)
        return json.dumps(obj, default=str)


def setup(fmt: str = "text") -> None:
    """Configure the root logger on stdout; uvicorn's loggers propagate to it (log_config=None)."""
    _state["format"] = fmt
    handler = logging.StreamHandler(sys.stdout)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per engine call would drown the log


def engine_line(line: str, source: str = "engine") -> str:
    """One relayed engine line, newline-terminated, in the configured format (`engine 1`: replica 1)."""
    if _state["format"] == "json":
        return (
            json.dumps({"time": _iso(datetime.now(UTC).timestamp()), "source": source, "message": line})
            + "\n"
        )
    return f"[{source}] {line}\n"


def fatal(message: str, detail_lines: list[str] | None = None) -> None:
    """The server's last words on stderr: `neuronserve serve: error: ...` (text) or one JSON object."""
    if _state["format"] == "json":
        obj: dict[str, Any] = {
            "time": _iso(datetime.now(UTC).timestamp()),
            "level": "ERROR",
            "logger": "neuronserve.serve",
            "message": message,
        }
        if detail_lines is not None:
            obj["engine_last_lines"] = detail_lines
        print(json.dumps(obj), file=sys.stderr)
    else:
        print(f"neuronserve serve: error: {message}", file=sys.stderr)
        for line in detail_lines or ():
            print(f"  | {line}", file=sys.stderr)
    sys.stderr.flush()
