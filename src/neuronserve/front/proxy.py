"""The one shared client to the engine, and streaming passthrough of engine responses.

Why a client of our own (front/enginepool.py): the front sits on every request, and on a small host
it shares the CPU with the engine. httpx's pure-Python HTTP/1.1 stack was most of the front's CPU per
request ("Serving overhead" in docs/PERFORMANCE.md); aiohttp, which parses in C, cut that by about
half, and was then itself the largest part of what remained ("Front ceiling"). The pool writes each
request in one piece and parses answers with httptools.

Why one pool with many connections: a connection per request costs a TCP connect and kills
keep-alive; the pool lets hundreds of concurrent generations share warm connections to 127.0.0.1.
Callers see only this module's names: `send`, `relay`, `read_body`, `next_chunk`, `StreamBroken`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any

import aiohttp
from starlette.responses import Response

from neuronserve.front.enginehttp import EngineResponse, Unreached
from neuronserve.front.enginepool import EnginePool
from neuronserve.front.errors import EngineTimeout, EngineUnreachable, error_body
from neuronserve.front.requestid import engine_id
from neuronserve.front.schema import loads
from neuronserve.front.streaming import Stream
from neuronserve.front.streamusage import Tap

log = logging.getLogger("neuronserve.front")

UNREACHED = (Unreached,)  # the request never reached the engine: another replica may take it (router.py)

# Hop-by-hop and framing headers are never copied; the server frames its own responses.
# `Expect: 100-continue` was the front's to answer, and the body is already read: forwarded, the
# engine client would wait for the engine's "100 Continue" before sending the body (an engine that
# never sends one held the request until the client gave up).
_DROP_REQUEST = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "transfer-encoding",
        "accept-encoding",
        "keep-alive",
        "expect",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
    }
)
_DROP_RESPONSE = frozenset(
    {"content-length", "connection", "transfer-encoding", "date", "server", "keep-alive"}
)
_STREAM_TYPES = ("text/event-stream", "application/jsonlines", "application/x-ndjson")


CONNECT_TIMEOUT_S = 5.0  # the TCP connect to 127.0.0.1 alone: an engine that takes longer is down
POOL_HEADROOM = 32  # connections beyond the gate's slots: /detokenize lookups, /metrics, /health polls
MIN_POOL = 64
UNLIMITED_POOL = 1024  # NEURONSERVE_MAX_CONCURRENCY=0 (no gate limit)


def pool_size(max_concurrency: int, configured: int | None = None) -> int:
    """Connections to the engine(s): NEURONSERVE_ENGINE_CONNECTIONS, else derived from the gate.

    Why derived this way: the gate counts sequences (request_cost.py), and the front opens at most one
    engine connection per prompt (a TGI `inputs` list fans out one /v1/completions per prompt; an
    OpenAI body is one request whatever its n), so the slots bound the inference connections;
    POOL_HEADROOM covers the front's own calls. A request that still finds the pool full waits for a
    connection (see EngineClient), it does not fail."""
    if configured:
        return configured
    if not max_concurrency:
        return UNLIMITED_POOL
    return max(MIN_POOL, max_concurrency + POOL_HEADROOM)


class EngineClient:
    """The engine's base URL, timeouts and pools; both pools are made on first use.

    Requests go through the front's own keep-alive HTTP/1.1 pool (front/enginepool.py: aiohttp's
    client was the largest part of the front's CPU per request); the engine's /metrics, scraped a
    few times a minute, through an aiohttp session (metrics.engine_metrics), bound to the running
    loop and so built lazily too.

    Timeouts: the wait for a free pooled connection AND the connect are bounded by the request
    deadline (SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS: a full pool used to fail requests after 5 s as
    if the engine were down), the TCP connect alone by CONNECT_TIMEOUT_S, the engine's silence
    (before its answer, or between stream chunks) by the request deadline.
    """

    def __init__(self, base_url: str, timeout_s: float, max_connections: int) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.connect_s = CONNECT_TIMEOUT_S  # read now: tests lower it for one client
        self.timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout_s, sock_connect=CONNECT_TIMEOUT_S, sock_read=timeout_s
        )
        self.pool = max_connections or UNLIMITED_POOL  # pool_size() says how big
        self._session: aiohttp.ClientSession | None = None
        self._engines: EnginePool | None = None

    def engines(self) -> EnginePool:
        if self._engines is None:
            self._engines = EnginePool(
                self.pool, wait_s=self.timeout_s, connect_s=self.connect_s, read_s=self.timeout_s
            )
        return self._engines

    def session(self) -> aiohttp.ClientSession:
        """aiohttp, for the engines' /metrics only."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=POOL_HEADROOM, limit_per_host=0, keepalive_timeout=75),
                timeout=self.timeout,
                auto_decompress=False,  # bytes pass through as the engine sent them
                skip_auto_headers=("User-Agent", "Accept-Encoding"),
            )
        return self._session

    async def call(
        self, base_url: str, method: str, path_query: str, headers: dict[str, str] | None, data: bytes | None
    ) -> EngineResponse:
        """One request to the engine at `base_url`; UNREACHED errors mean it never got there."""
        return await self.engines().request(base_url, method, path_query, headers, data)

    async def request(
        self, method: str, path_query: str, headers: dict[str, str] | None, data: bytes | None
    ) -> EngineResponse:
        """One engine request (the router overrides this to pick a replica)."""
        return await self.call(self.base_url, method, path_query, headers, data)

    async def engine_metrics(self) -> bytes:
        """The engine's /metrics text for the front's /metrics (the router merges all replicas')."""
        from neuronserve.front.metrics import engine_metrics  # noqa: PLC0415 (metrics imports this module's users)

        return await engine_metrics(self.session(), self.base_url)

    def replica_counts(self) -> bytes:
        """The front's per-replica series: none for one engine (front/router.py has several)."""
        return b""

    async def aclose(self) -> None:
        if self._engines is not None:
            self._engines.close()
        if self._session is not None:
            await self._session.close()


def make_client(base_url: str, timeout_s: float, max_connections: int) -> EngineClient:
    return EngineClient(base_url, timeout_s, max_connections)


def forward_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {k: v for k, v in headers if k.lower() not in _DROP_REQUEST}


def response_headers(resp: EngineResponse) -> dict[str, str]:
    return {k: v for k, v in resp.headers.items() if k not in _DROP_RESPONSE}  # names lower-cased


async def send(
    client: EngineClient,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    content: bytes | None = None,
    params: str | None = None,
) -> EngineResponse:
    """Send; the body is left unread. Engine trouble becomes 504 (timeout) or 503 (unreachable)."""
    # already percent-encoded (a fixed route, or the client's raw path and query): sent as is
    if headers and "x-request-id" in headers:  # unique per engine call: vLLM uses it as given
        headers = {**headers, "x-request-id": engine_id(headers["x-request-id"])}
    try:
        return await client.request(method, path + (f"?{params}" if params else ""), headers, content)
    except TimeoutError:
        raise EngineTimeout(f"the engine did not answer {path} in time") from None
    except (OSError, aiohttp.ClientError) as err:
        raise EngineUnreachable(f"the engine is unreachable ({type(err).__name__}); retry later") from None


class StreamBroken(Exception):
    """The engine stalled or went away after the response started: the in-band error to send."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _broken(err: BaseException) -> StreamBroken:
    if isinstance(err, TimeoutError):
        return StreamBroken(
            504, "the engine stopped sending (no data within SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS)"
        )
    return StreamBroken(502, f"the engine connection broke mid-stream ({type(err).__name__})")


async def next_chunk(resp: EngineResponse) -> bytes:
    """What arrived of the body since the last call (b"" at its end); a stall or a broken connection
    is StreamBroken. The caller closes `resp`. (A coroutine, not an async generator: one layer less
    per chunk of a stream.)"""
    try:
        return await resp.chunk()
    except OSError as err:  # TimeoutError is one
        raise _broken(err) from None


async def read_body(resp: EngineResponse) -> bytes:
    """The whole (small) body; a stall is 504, a broken connection 503. Always frees the connection."""
    try:
        return await resp.read()
    except TimeoutError:
        raise EngineTimeout("the engine did not finish its answer in time") from None
    except OSError as err:
        raise EngineUnreachable(f"the engine connection broke ({type(err).__name__})") from None
    finally:
        resp.release()


def done(resp: EngineResponse) -> None:
    """After a stream: a fully read body returns its connection to the pool; an abandoned one is
    closed, which is how the engine learns that nobody reads the generation and aborts it."""
    if resp.at_eof():
        resp.release()
    else:
        resp.close()


def error_event(status: int, message: str, jsonlines: bool) -> bytes:
    """The one error shape, as a final SSE event or JSON line: a stream can no longer change its status."""
    body = json.dumps(error_body(status, message))
    return (body + "\n").encode() if jsonlines else f"data: {body}\n\n".encode()


Record = Callable[[dict[str, Any]], None]


async def _raw(resp: EngineResponse, tap: Tap, record: Record | None) -> AsyncGenerator[bytes, None]:
    """The engine's stream as it comes, through `tap` (its usage, front/streamusage.py), recorded at
    its end however it ends."""
    try:
        while chunk := await next_chunk(resp):
            out = tap.feed(chunk)
            if out:
                yield out
        rest = tap.close()
        if rest:
            yield rest
    except StreamBroken as err:
        # The engine stalled or went away mid-stream: say so in-band (SageMaker turns it into a
        # ModelStreamError for the client) rather than ending the body as if it were complete.
        log.warning("stream from the engine broke: %s", err.message)
        yield tap.close() + error_event(
            err.status, err.message, "event-stream" not in resp.headers.get("content-type", "")
        )
    finally:
        done(resp)  # also on client disconnect (the generator is closed)
        if record is not None:
            record(tap.usage())


def is_stream(resp: EngineResponse) -> bool:
    ctype = resp.headers.get("content-type", "")
    return any(t in ctype for t in _STREAM_TYPES)


async def relay(resp: EngineResponse, record: Record | None = None, tap: Tap | None = None) -> Response:
    """Engine response -> our response: streams flow chunk by chunk, small bodies in one piece.
    `record` gets the answer's usage (a stream's at its end); `tap` is the stream's (a fresh one if none)."""
    headers = response_headers(resp)
    if is_stream(resp):
        stream = _raw(resp, tap or Tap(), record)
        return Stream(stream, status_code=resp.status, headers=headers, closing=lambda: done(resp))
    data = await read_body(resp)
    if record is not None and resp.status == 200 and b'"usage"' in data:
        try:
            usage = loads(data).get("usage") or {}
        except (ValueError, AttributeError):
            usage = {}
        if isinstance(usage, dict) and usage:
            record(usage)
    return Response(data, status_code=resp.status, headers=headers)
