"""Logging for `serve`: its set-up (format, handler, what the logging module records), the engine's
relayed lines and the command's last words.

The parts: logtext.py (escaping what clients sent), logformat.py (the text and JSON formats),
logbatch.py (lines written in batches; the access line without a LogRecord). The engine's own lines
are relayed, not re-parsed: in JSON each is wrapped as {"source": "engine", "message": ...} so the
stream stays one JSON object per line. Secrets are scrubbed before lines get here (redact.py).

Why the logging module is told not to record callers, threads and processes (`setup`): none of it is
in either format, and at thousands of access lines a second finding the caller's frame and asking the
kernel for the process id were a measurable part of each line's cost (the logging HOWTO's
"Optimization" section names these switches).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from neuronserve.config.table import VARS
from neuronserve.logbatch import BatchHandler
from neuronserve.logformat import TEXT_FORMAT, JsonFormatter, TextFormatter, iso
from neuronserve.logtext import escape

_state = {"format": "text"}  # set once by setup(); read by the engine relay and fatal()


def parse_format(environ: Mapping[str, str]) -> str:
    """NEURONSERVE_LOG_FORMAT through its row (text | json): a ConfigError naming it otherwise.

    Read before the settings (the log format applies to their errors too), by the same row."""
    value: str = VARS["NEURONSERVE_LOG_FORMAT"].read(environ)
    return value


def flush_handlers() -> None:
    """Write out whatever the root logger's handlers keep (BatchHandler's lines not yet written)."""
    for handler in logging.getLogger().handlers:
        handler.flush()


def setup(fmt: str = "text") -> None:
    """Configure the root logger on stdout; uvicorn's loggers propagate to it (log_config=None)."""
    _state["format"] = fmt
    logging._srcfile = None  # no caller lookup per record (module docstring)
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler = BatchHandler(sys.stdout)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter(TEXT_FORMAT))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per engine call would drown the log


def current_format() -> str:
    """The format setup() configured ("text" or "json"), for processes this one starts."""
    return _state["format"]


def engine_line(line: str, source: str = "engine") -> str:
    """One relayed engine line, newline-terminated, in the configured format (`engine 1`: replica 1)."""
    if _state["format"] == "json":
        return (
            json.dumps(
                {"time": iso(datetime.now(UTC).timestamp()), "source": source, "message": escape(line)}
            )
            + "\n"
        )
    return f"[{source}] {escape(line)}\n"


def fatal(message: str, detail_lines: list[str] | None = None, command: str = "serve") -> None:
    """The command's last words on stderr: `neuronserve serve: error: ...` (text) or one JSON object.

    What the log handlers still keep (BatchHandler) is written first, so the last words stay last."""
    flush_handlers()
    if _state["format"] == "json":
        obj: dict[str, Any] = {
            "time": iso(datetime.now(UTC).timestamp()),
            "level": "ERROR",
            "logger": f"neuronserve.{command}",
            "message": escape(message),
        }
        if detail_lines is not None:
            obj["engine_last_lines"] = [escape(line) for line in detail_lines]
        print(json.dumps(obj), file=sys.stderr)
    else:
        print(f"neuronserve {command}: error: {escape(message)}", file=sys.stderr)
        for line in detail_lines or ():
            print(f"  | {escape(line)}", file=sys.stderr)
    sys.stderr.flush()
