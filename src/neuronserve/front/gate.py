"""Pure-ASGI gate in front of every route but /ping and /metrics: route allowlist, phase check,
concurrency limit, in-flight count (for draining), the front's request metrics, request ids and the
one log line per request.

Why pure ASGI (not BaseHTTPMiddleware): it adds no task or buffering per request, so streamed bodies
flow through untouched and the gate costs microseconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from neuronserve.front import routes
from neuronserve.front.disconnect import CLIENT_CLOSED, run_cancelling_on_disconnect
from neuronserve.front.errors import FrontError, NotFound, NotReady, Overloaded, error_bytes
from neuronserve.front.metrics import FrontMetrics, reason_for, route_label
from neuronserve.front.routes import GENERATE_ROUTES, UNGATED
from neuronserve.front.state import Phase, ServerState
from neuronserve.front.work import CHARGE_KEY, Charge

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("neuronserve.access")

TOKENS_KEY = "neuronserve.tokens"  # handlers put (prompt_tokens, completion_tokens) here
SCHEMA_KEY = "neuronserve.schema"  # handlers put the request's schema here (chat, completion, tgi, ...)
REJECTED_KEY = "neuronserve.rejected"  # the app's FrontError handler puts the refused status here
REQUEST_ID_KEY = "neuronserve.request_id"  # the request's id: forwarded, echoed, logged
_ID_HEADERS = (b"x-request-id", b"x-amzn-sagemaker-inference-id")


def request_id(scope: Scope) -> str:
    """X-Request-Id, else SageMaker's X-Amzn-SageMaker-Inference-Id, else a new id (kept in scope)."""
    rid = scope.get(REQUEST_ID_KEY)
    if rid:
        return str(rid)
    found = dict((k, v) for k, v in scope.get("headers", ()) if k in _ID_HEADERS)
    raw = found.get(_ID_HEADERS[0]) or found.get(_ID_HEADERS[1])
    text = raw.decode("latin-1").strip()[:200] if raw else ""
    rid = text if text and text.isprintable() else uuid.uuid4().hex
    scope[REQUEST_ID_KEY] = rid
    return rid


def _default_schema(path: str) -> str:
    if path.startswith("/v1/"):
        return "openai"
    if path in GENERATE_ROUTES:
        return "tgi"
    return "none"


class Gate:
    def __init__(
        self,
        app: ASGIApp,
        state: ServerState,
        max_concurrency: int,
        *,
        metrics: FrontMetrics | None = None,
        expose_engine_routes: bool = False,
    ) -> None:
        self.app = app
        self.state = state
        self.max_concurrency = max_concurrency
        self.metrics = metrics
        self.expose_engine_routes = expose_engine_routes
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in UNGATED:
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        rid = request_id(scope).encode("latin-1", "replace")
        if not routes.is_allowed(path, self.expose_engine_routes):
            await self._refuse(scope, send, start, NotFound(routes.refusal(path)), reason="not_found")
            return
        phase = self.state.phase
        if phase != Phase.READY:
            draining = phase == Phase.DRAINING
            why = "draining" if draining else "not ready"
            reason = "draining" if draining else "not_ready"
            refusal = NotReady(f"server is {why} (phase {phase}); retry later")
            await self._refuse(scope, send, start, refusal, reason=reason)
            return
        if self.max_concurrency and self.in_flight >= self.max_concurrency:
            message = f"too many requests in flight (limit {self.max_concurrency}); retry later"
            await self._refuse(scope, send, start, Overloaded(message), reason="limit")
            return
        status = [0]
        first_byte: list[float | None] = [None]

        async def send_wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [h for h in message.get("headers", ()) if h[0].lower() != b"x-request-id"]
                message["headers"] = [*headers, (b"x-request-id", rid)]
            elif (
                first_byte[0] is None
                and message["type"] == "http.response.body"
                and (message.get("body") or not message.get("more_body"))
            ):
                first_byte[0] = time.perf_counter()
            await send(message)

        charge = scope[CHARGE_KEY] = Charge(self)  # weight 1 now, the request's sequences once parsed
        self.in_flight += 1
        self.idle.clear()
        gone = False
        try:
            gone = await run_cancelling_on_disconnect(self.app, scope, receive, send_wrapped)
        finally:
            self.in_flight -= charge.weight
            if self.in_flight == 0:
                self.idle.set()
            code = CLIENT_CLOSED if gone else (status[0] or 500)
            if self.metrics is not None:
                rejected = scope.get(REJECTED_KEY)
                refused = reason_for(rejected) if rejected else None
                if refused:
                    self.metrics.reject(refused)
                ttfb = None if first_byte[0] is None else first_byte[0] - start
                schema = scope.get(SCHEMA_KEY) or _default_schema(path)
                self.metrics.observe(path, schema, code, ttfb, time.perf_counter() - start)
            self._log(scope, code, start)

    def refused_over_limit(self) -> None:
        """A request refused when its sequences did not fit (work.Charge): counted as the limit's."""
        if self.metrics is not None:
            self.metrics.reject("limit")

    async def _refuse(self, scope: Scope, send: Send, start: float, err: FrontError, *, reason: str) -> None:
        status = err.status
        await _reject(send, status, err.message, request_id(scope).encode("latin-1", "replace"))
        if self.metrics is not None:
            self.metrics.reject(reason)
            took = time.perf_counter() - start
            path = scope.get("path", "")
            self.metrics.observe(path, _default_schema(path), status, took, took)
        self._log(scope, status, start)

    def _log(self, scope: Scope, status: int, start: float) -> None:
        rid = request_id(scope)
        tokens = scope.get(TOKENS_KEY) or (None, None)
        latency_ms = (time.perf_counter() - start) * 1000.0
        path = scope.get("path", "")
        log.info(
            "%s %s status=%d latency_ms=%.1f tokens_in=%s tokens_out=%s request_id=%s",
            scope.get("method"),
            path,
            status,
            latency_ms,
            "-" if tokens[0] is None else tokens[0],
            "-" if tokens[1] is None else tokens[1],
            rid,
            extra={
                "request_id": rid,
                "route": route_label(path),
                "method": scope.get("method"),
                "status": status,
                "latency_ms": round(latency_ms, 1),
                "tokens": {"prompt": tokens[0], "completion": tokens[1]},
            },
        )


async def _reject(send: Send, status: int, message: str, rid: bytes) -> None:
    body = error_bytes(status, message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-request-id", rid),
    ]
    if status in (429, 503):
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
