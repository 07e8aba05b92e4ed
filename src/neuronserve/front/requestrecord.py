"""What the front keeps of each request once it is answered, refused or abandoned: the request
metrics and the one access line.

Why a module of its own: the gate (front/gate.py) writes it at three moments (answered, refused,
abandoned), and the record is one thing whichever ends the request. The handlers tell it what only they
know, through the request's scope: its schema (SCHEMA_KEY), its token counts (TOKENS_KEY), the status a
handler refused it with (REJECTED_KEY, for the rejection reasons).

The access line: `METHOD PATH status= latency_ms= tokens_in= tokens_out= request_id=`, written by
logbatch.info_line as `logging.getLogger("neuronserve.access").info` would write it. The method and
path are the client's, written by logtext.field: the path as the client encoded it, and `=`, spaces,
quotes and anything else that could end this field or start another percent-encoded, so a query for
`status=` or `request_id=` finds only the real fields (docs/RELIABILITY.md, "logs, ids"). The id is
from the safe set (requestid.py); the token counts are the engine's numbers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import MutableMapping
from typing import Any

from neuronserve.front.metrics import FrontMetrics, reason_for, route_label
from neuronserve.front.requestid import request_id
from neuronserve.front.routes import GENERATE_ROUTES
from neuronserve.logbatch import info_line
from neuronserve.logtext import field

Scope = MutableMapping[str, Any]

log = logging.getLogger("neuronserve.access")

TOKENS_KEY = "neuronserve.tokens"  # handlers put (prompt_tokens, completion_tokens) here
SCHEMA_KEY = "neuronserve.schema"  # handlers put the request's schema here (chat, completion, tgi, ...)
REJECTED_KEY = "neuronserve.rejected"  # the app's FrontError handler puts the refused status here


def default_schema(path: str) -> str:
    """The schema label of a request no handler classified (refused before one ran, or not generating)."""
    if path.startswith("/v1/"):
        return "openai"
    if path in GENERATE_ROUTES:
        return "tgi"
    return "none"


class RequestRecord:
    """The request metrics (None: none kept) and the access line, for every path of one front process."""

    __slots__ = ("metrics",)

    def __init__(self, metrics: FrontMetrics | None) -> None:
        self.metrics = metrics

    def measure(self, scope: Scope, path: str, code: int, start: float, first_byte: float | None) -> None:
        """An answered (or abandoned) request: its status, time to first byte and duration; the
        handler's refusal counted under its reason."""
        metrics = self.metrics
        if metrics is None:
            return
        rejected = scope.get(REJECTED_KEY)
        refused = reason_for(rejected) if rejected else None
        if refused:
            metrics.reject(refused)
        ttfb = None if first_byte is None else first_byte - start
        schema = scope.get(SCHEMA_KEY) or default_schema(path)
        metrics.observe(path, schema, code, ttfb, time.perf_counter() - start)

    def refused(self, scope: Scope, status: int, start: float, reason: str) -> None:
        """A request the gate refused itself (no handler ran): counted under `reason`."""
        metrics = self.metrics
        if metrics is not None:
            metrics.reject(reason)
            took = time.perf_counter() - start
            path = scope.get("path", "")
            metrics.observe(path, default_schema(path), status, took, took)

    def log(self, scope: Scope, status: int, start: float) -> None:
        """The one access line (module docstring)."""
        rid = request_id(scope)
        tokens = scope.get(TOKENS_KEY) or (None, None)
        latency_ms = (time.perf_counter() - start) * 1000.0
        path = scope.get("path", "")
        raw = scope.get("raw_path")
        method = scope.get("method")
        message = (
            f"{field(str(method))} {field(raw if raw else path)} status={status:d} "
            f"latency_ms={latency_ms:.1f} tokens_in={_count(tokens[0])} tokens_out={_count(tokens[1])} "
            f"request_id={rid}"
        )
        extra = {
            "request_id": rid,
            "route": route_label(path),
            "method": method,
            "status": status,
            "latency_ms": round(latency_ms, 1),
            "tokens": {"prompt": tokens[0], "completion": tokens[1]},
        }
        info_line(log, message, extra)  # as log.info would write it, without its record (logbatch.py)


def _count(value: Any) -> str:
    """A token count for the text line: the number, `-` when unknown, anything else as a field."""
    if value is None:
        return "-"
    return str(value) if type(value) is int else field(str(value))
