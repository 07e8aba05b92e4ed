"""The serve's log lines written in batches (BatchHandler), and the access line written without a
LogRecord when only our handler would see it (info_line).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from neuronserve.logformat import EXTRA_FIELDS, TEXT_FORMAT, JsonFormatter, TextFormatter, iso
from neuronserve.logtext import escape, escape_value

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
    machinery was most (cProfile of Gate._log, now RequestRecord.log: the record's __init__ and
    makeRecord 0.8 of 3.1 s, handle and callHandlers 1.2). Anything else (a test's capture handler,
    a filter, a level, a handler someone added) gets the record through logging as before."""
    handler = _sole_batch_handler(logger)
    formatter = handler.formatter if handler is not None else None
    if type(formatter) is TextFormatter and formatter._fmt == TEXT_FORMAT and formatter.datefmt is None:
        stamp = formatter.formatTime(_Stamp(time.time()))  # type: ignore[arg-type]
        text = f"{stamp} INFO {logger.name}: {escape(message)}"
    elif type(formatter) is JsonFormatter:  # (exactly ours: a subclass may write otherwise)
        obj: dict[str, Any] = {"time": iso(time.time()), "level": "INFO", "logger": logger.name}
        obj["message"] = escape(message)
        for name in EXTRA_FIELDS:
            if name in extra:
                obj[name] = escape_value(extra[name])
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
