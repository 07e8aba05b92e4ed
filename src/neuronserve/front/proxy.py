"""The one shared HTTP client to the engine, and streaming passthrough of engine responses.

Why one client with a large pool: a client per request costs a TCP connect and kills keep-alive;
the pool lets hundreds of concurrent generations share warm connections to 127.0.0.1.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx
from starlette.background import BackgroundTask
from starlette.responses import Response, StreamingResponse

from neuronserve.front.errors import FrontError, error_body

log = logging.getLogger("neuronserve.front")

# Hop-by-hop and framing headers are never copied; the server frames its own responses.
_DROP_REQUEST = frozenset(
    {"host", "content-length", "connection", "transfer-encoding", "accept-encoding", "keep-alive"}
)
_DROP_RESPONSE = frozenset(
    {"content-length", "connection", "transfer-encoding", "date", "server", "keep-alive"}
)
_STREAM_TYPES = ("text/event-stream", "application/jsonlines", "application/x-ndjson")


def make_client(base_url: str, timeout_s: float, max_connections: int) -> httpx.AsyncClient:
    pool = max(64, max_connections or 1024)
    return httpx.AsyncClient(
        base_url=base_url,
        timeout=httpx.Timeout(timeout_s, connect=5.0),
        limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool),
    )


def forward_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {k: v for k, v in headers if k.lower() not in _DROP_REQUEST}


def response_headers(resp: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in resp.headers.items() if k.lower() not in _DROP_RESPONSE}


async def send(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    content: bytes | None = None,
    params: Any = None,
) -> httpx.Response:
    """Send with streaming on; engine trouble becomes 504 (timeout) or 503 (unreachable)."""
    req = client.build_request(method, path, headers=headers, content=content, params=params)
    try:
        return await client.send(req, stream=True)
    except httpx.TimeoutException:
        raise FrontError(504, f"the engine did not answer {path} in time") from None
    except httpx.TransportError as err:
        raise FrontError(503, f"the engine is unreachable ({type(err).__name__}); retry later") from None


def stream_failure(err: httpx.HTTPError) -> tuple[int, str]:
    """Why a stream broke after its 200 was sent: the status and message of the in-band error."""
    if isinstance(err, httpx.TimeoutException):
        return 504, "the engine stopped sending (no data within SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS)"
    return 502, f"the engine connection broke mid-stream ({type(err).__name__})"


def error_event(status: int, message: str, jsonlines: bool) -> bytes:
    """The one error shape, as a final SSE event or JSON line: a stream can no longer change its status."""
    body = json.dumps(error_body(status, message))
    return (body + "\n").encode() if jsonlines else f"data: {body}\n\n".encode()


async def _raw(resp: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in resp.aiter_raw():
            yield chunk
    except httpx.HTTPError as err:
        # The engine stalled or went away mid-stream: say so in-band (SageMaker turns it into a
        # ModelStreamError for the client) rather than ending the body as if it were complete.
        status, message = stream_failure(err)
        log.warning("stream from the engine broke: %s", message)
        yield error_event(status, message, "event-stream" not in resp.headers.get("content-type", ""))
    finally:
        # Also on client disconnect (the generator is closed): frees the pooled connection, and the
        # engine aborts a generation nobody reads.
        await resp.aclose()


def is_stream(resp: httpx.Response) -> bool:
    ctype = resp.headers.get("content-type", "")
    return any(t in ctype for t in _STREAM_TYPES)


async def relay(resp: httpx.Response, usage_sink: dict[str, Any] | None = None) -> Response:
    """Engine response -> our response: streams flow chunk by chunk, small bodies in one piece."""
    headers = response_headers(resp)
    if is_stream(resp):
        return StreamingResponse(
            _raw(resp), status_code=resp.status_code, headers=headers, background=BackgroundTask(resp.aclose)
        )
    try:
        data = await resp.aread()
    except httpx.TimeoutException:
        raise FrontError(504, "the engine did not finish its answer in time") from None
    except httpx.HTTPError as err:
        raise FrontError(503, f"the engine connection broke ({type(err).__name__})") from None
    finally:
        await resp.aclose()
    if usage_sink is not None and resp.status_code == 200 and b'"usage"' in data:
        try:
            usage = json.loads(data).get("usage") or {}
            usage_sink.update(usage)
        except (ValueError, AttributeError):
            pass
    return Response(data, status_code=resp.status_code, headers=headers)
