"""Pure-ASGI gate in front of every route but /ping: phase check, concurrency limit, in-flight count
(for draining) and the one log line per request.

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

from neuronserve.front.errors import error_bytes
from neuronserve.front.state import Phase, ServerState

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("neuronserve.access")

TOKENS_KEY = "neuronserve.tokens"  # handlers put (prompt_tokens, completion_tokens) here
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


UNGATED = frozenset({"/ping"})


class Gate:
    def __init__(self, app: ASGIApp, state: ServerState, max_concurrency: int) -> None:
        self.app = app
        self.state = state
        self.max_concurrency = max_concurrency
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNGATED:
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        rid = request_id(scope).encode("latin-1", "replace")
        phase = self.state.phase
        if phase != Phase.READY:
            why = "draining" if phase == Phase.DRAINING else "not ready"
            await _reject(send, 503, f"server is {why} (phase {phase}); retry later", rid)
            self._log(scope, 503, start)
            return
        if self.max_concurrency and self.in_flight >= self.max_concurrency:
            await _reject(
                send, 429, f"too many requests in flight (limit {self.max_concurrency}); retry later", rid
            )
            self._log(scope, 429, start)
            return
        status = [0]

        async def send_wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [h for h in message.get("headers", ()) if h[0].lower() != b"x-request-id"]
                message["headers"] = [*headers, (b"x-request-id", rid)]
            await send(message)

        self.in_flight += 1
        self.idle.clear()
        try:
            await self.app(scope, receive, send_wrapped)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.idle.set()
            self._log(scope, status[0] or 500, start)

    def _log(self, scope: Scope, status: int, start: float) -> None:
        rid = request_id(scope)
        tokens = scope.get(TOKENS_KEY) or (None, None)
        log.info(
            "%s %s status=%d latency_ms=%.1f tokens_in=%s tokens_out=%s request_id=%s",
            scope.get("method"),
            scope.get("path"),
            status,
            (time.perf_counter() - start) * 1000.0,
            "-" if tokens[0] is None else tokens[0],
            "-" if tokens[1] is None else tokens[1],
            rid,
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
