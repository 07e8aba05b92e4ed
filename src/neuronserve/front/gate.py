"""Pure-ASGI gate in front of every route but /ping: phase check, concurrency limit, in-flight count
(for draining) and the one log line per request.

Why pure ASGI (not BaseHTTPMiddleware): it adds no task or buffering per request, so streamed bodies
flow through untouched and the gate costs microseconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
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
        phase = self.state.phase
        if phase != Phase.READY:
            why = "draining" if phase == Phase.DRAINING else "not ready"
            await _reject(send, 503, f"server is {why} (phase {phase}); retry later")
            self._log(scope, 503, start)
            return
        if self.max_concurrency and self.in_flight >= self.max_concurrency:
            await _reject(
                send, 429, f"too many requests in flight (limit {self.max_concurrency}); retry later"
            )
            self._log(scope, 429, start)
            return
        status = [0]

        async def send_wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
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
        rid = "-"
        for key, value in scope.get("headers", ()):
            if key == b"x-amzn-sagemaker-inference-id":
                rid = value.decode("latin-1")
                break
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


async def _reject(send: Send, status: int, message: str) -> None:
    body = error_bytes(status, message)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status in (429, 503):
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
