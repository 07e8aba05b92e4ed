"""Logging for `serve`: plain text (the default) or one JSON object per line (NEURONSERVE_LOG_FORMAT=json).

Why JSON: CloudWatch Logs Insights (and most log stores) query JSON fields directly (`status`,
`latency_ms`, `request_id`), where text lines need a parse pattern per message. The engine's own
lines are relayed, not re-parsed: each is wrapped as {"source": "engine", "message": ...} so the
stream stays one JSON object per line. Secrets are scrubbed before lines get here (redact.py).

Why every message is escaped: log lines carry what clients sent (paths, ids, model names, error
texts). A `%0A` in a path became a real newline in the text log, a forged line that a reader or a log
query could not tell from ours. `escape` is the one function both formats, the engine relay and the
last words use: control characters become backslash escapes (`\\x0a`), so one event is always one line.

Why a value a client chose is also percent-encoded (`field`): the access line is `key=value` fields,
and log queries find a field by searching for `status=` or `request_id=` anywhere in the line. A path
`/x%20status=200%20request_id=FORGED` put those words into the line before the real fields, and the
first match was the client's. `field` leaves only characters that cannot end a value or start one
(`=`, a space, a quote, a backslash, anything outside printable ASCII become `%XX` of their bytes;
a path keeps its own `%XX` escapes as the client sent them).

Why the logging module is told not to record callers, threads and processes (`setup`): none of it is
in either format, and at thousands of access lines a second finding the caller's frame and asking the
kernel for the process id were a measurable part of each line's cost (the logging HOWTO's
"Optimization" section names these switches).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from neuronserve.config.table import VARS

# Fields the access log passes with `extra=`; copied into the JSON object when present.
EXTRA_FIELDS = ("request_id", "route", "method", "status", "latency_ms", "tokens")
_state = {"format": "text"}  # set once by setup(); read by the engine relay and fatal()


def parse_format(environ: Mapping[str, str]) -> str:
    """NEURONSERVE_LOG_FORMAT through its row (text | json): a ConfigError naming it otherwise.

    Read before the settings (the log format applies to their errors too), by the same row."""
    value: str = VARS["NEURONSERVE_LOG_FORMAT"].read(environ)
    return value


# C0 controls, DEL, C1 controls and the Unicode line/paragraph separators: each breaks or hides text
# in a terminal or a log viewer. A backslash is left alone: it cannot start a new line.
_CONTROLS = [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]
_ESCAPES = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS}


def escape(text: str) -> str:
    """`text` with its control characters escaped (the common all-printable case: one C-level scan)."""
    if text.isprintable():
        return text
    return text.translate(_ESCAPES)


_FIELD_SAFE = re.compile(rb"[A-Za-z0-9\-._~/!$&'()*+,;:@%]*")  # what a field value keeps as it is


_FIELDS: dict[str | bytes, str] = {}  # field()'s recent answers: the methods and paths of every request
_FIELDS_MAX = 256


def field(value: str | bytes) -> str:
    """`value` as one `key=value` field's value that no query can mistake for another field (module
    docstring): bytes as they are, text as UTF-8, every byte outside _FIELD_SAFE as `%XX`.

    Short values are remembered (at most _FIELDS_MAX, forgotten all at once when full): every access
    line asks for its method and path, nearly always the same few."""
    known = _FIELDS.get(value)
    if known is not None:
        return known
    raw = value if isinstance(value, bytes) else value.encode("utf-8", "backslashreplace")
    if _FIELD_SAFE.fullmatch(raw):
        text = raw.decode("ascii")
    else:
        text = "".join(chr(b) if _FIELD_SAFE.fullmatch(bytes((b,))) else f"%{b:02X}" for b in raw)
    if len(value) <= 256:
        if len(_FIELDS) >= _FIELDS_MAX:
            _FIELDS.clear()
        _FIELDS[value] = text
    return text


def _escape_value(value: Any) -> Any:
    return escape(value) if isinstance(value, str) else value


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


_iso_second: list[tuple[int, str]] = [(-1, "")]  # the last whole second of _iso, and its text


def _iso(created: float) -> str:
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
            "time": _iso(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": escape(record.getMessage()),
        }
        for name in EXTRA_FIELDS:
            if name in record.__dict__:
                obj[name] = _escape_value(record.__dict__[name])
        if record.exc_info:
            obj["exception"] = self.formatException(record.exc_info)
        return json.dumps(obj, default=str)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_BUFFERED = 65_536  # characters kept before they are written anyway
FLUSH_S = 0.02  # the longest an INFO line logged on the event loop waits to be written


class BatchHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A StreamHandler that writes the event loop's INFO lines in batches, each at most FLUSH_S late.

    Why: logging's StreamHandler writes and flushes every record, so each access line was a write
    system call of its own, made on the event loop, per request. Measured in a one-piece request path
    (bench/ceiling/floor_relay.py `one`): the access line was ~28 µs of ~145 µs a request, 9 of them
    the write; written in batches, the line costs ~20 (docs/PERFORMANCE.md, "Hot-path cuts"). The
    engine's relayed lines are batched the same way, for the same reason (engine/process.py). A line
    logged while a loop runs in this thread is kept, and one timer per batch (`call_later(FLUSH_S)`)
    writes what was kept in one write. The time in a line is its record's, and lines keep their
    order. (Per loop turn was tried first: under load a turn ends about one request, so it batched
    nothing.)

    What is written at once, with everything kept before it: a WARNING or worse (the reason for what
    happens next must not wait), a line from a thread with no running loop (the probe and relay
    threads, start-up, shutdown), and anything beyond MAX_BUFFERED. At exit logging.shutdown flushes
    what is kept; a process killed outright (SIGKILL) loses at most the last FLUSH_S of INFO lines.
    A write that fails (stdout closed) drops the text, as the engine relay does."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._kept: list[str] = []
        self._size = 0
        self._timed: asyncio.AbstractEventLoop | None = None  # the loop whose timer will write what is kept

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record) + self.terminator
        except Exception:  # logging's contract: a bad record is reported (handleError), never raised
            self.handleError(record)
            return
        self.keep(text, record.levelno)

    def keep(self, text: str, levelno: int = logging.INFO) -> None:
        """A formatted line (with its terminator) written with the others: at once or in the batch.
        The caller holds the handler's lock (`handle` does, and `info_line`)."""
        self._kept.append(text)
        self._size += len(text)
        if levelno >= logging.WARNING or self._size >= MAX_BUFFERED:
            self.flush()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: no timer would run
            loop = None
        if self._timed is not None and self._timed.is_closed():  # closed before its timer ran
            self._timed = None
        if loop is None or (self._timed is not None and self._timed is not loop):
            self.flush()  # (a second loop in another thread: not the front's case, never held back)
            return
        if self._timed is None:
            self._timed = loop
            loop.call_later(FLUSH_S, self._write_kept)

    def _write_kept(self) -> None:
        self.acquire()
        try:
            self._timed = None
            self.flush()
        finally:
            self.release()

    def flush(self) -> None:
        self.acquire()
        try:
            text, self._kept, self._size = "".join(self._kept), [], 0
            if text:
                self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # stdout closed or broken: nowhere left to write
            pass
        finally:
            self.release()


def _sole_batch_handler(logger: logging.Logger) -> BatchHandler | None:
    """The handler an INFO record of `logger` would reach, when that is one of ours and nothing else
    would see the record on its way (no filter, no other handler, nothing disabled); else None."""
    if not logger.isEnabledFor(logging.INFO):
        return None
    node: logging.Logger | None = logger
    while node is not None:
        if node.filters or node.disabled:
            return None
        handlers = node.handlers
        if handlers:
            if node.parent is not None or len(handlers) != 1:
                return None  # a handler below the root, or a second one: logging's own way
            (handler,) = handlers
            if type(handler) is not BatchHandler or handler.filters or handler.level > logging.INFO:
                return None
            return handler
        if not node.propagate:
            return None
        node = node.parent
    return None


class _Stamp:
    """What a formatter reads of a record to write its time, as logging.LogRecord sets it (Python
    3.11-3.12, Lib/logging/__init__.py, LogRecord.__init__: `created` and `msecs` from time.time())."""

    __slots__ = ("created", "msecs")

    def __init__(self, created: float) -> None:
        self.created = created
        self.msecs = int((created - int(created)) * 1000) + 0.0


def info_line(logger: logging.Logger, message: str, extra: Mapping[str, Any]) -> None:
    """`logger.info("%s", message, extra=extra)`, written without a LogRecord when the line would
    only reach our handler with one of our two formatters (the serve's own set-up): the same text,
    in the same place among the other lines.

    Why: the access line, one per request, went through the logging module's record, filters,
    handler and formatter machinery; measured in process at about 9 µs of text line of which the
    machinery was most (cProfile of Gate._log: the record's __init__ and makeRecord 0.8 of 3.1 s,
    handle and callHandlers 1.2). Anything else (a test's capture handler, a filter, a level, a
    handler someone added) gets the record through logging as before."""
    handler = _sole_batch_handler(logger)
    formatter = handler.formatter if handler is not None else None
    if type(formatter) is TextFormatter and formatter._fmt == TEXT_FORMAT and formatter.datefmt is None:
        stamp = formatter.formatTime(_Stamp(time.time()))  # type: ignore[arg-type]
        text = f"{stamp} INFO {logger.name}: {escape(message)}"
    elif type(formatter) is JsonFormatter:  # (exactly ours: a subclass may write otherwise)
        obj: dict[str, Any] = {"time": _iso(time.time()), "level": "INFO", "logger": logger.name}
        obj["message"] = escape(message)
        for name in EXTRA_FIELDS:
            if name in extra:
                obj[name] = _escape_value(extra[name])
        text = json.dumps(obj, default=str)
    else:  # not the serve's own set-up: logging's way
        logger.info("%s", message, extra=dict(extra))
        return
    assert handler is not None  # (a formatter was found on it)
    handler.acquire()
    try:
        handler.keep(text + handler.terminator)
    finally:
        handler.release()


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
                {"time": _iso(datetime.now(UTC).timestamp()), "source": source, "message": escape(line)}
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
            "time": _iso(datetime.now(UTC).timestamp()),
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
