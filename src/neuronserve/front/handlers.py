"""The front's routes: /ping from state, /invocations by schema, TGI's routes, everything else proxied to
the engine (front/app.py assembles them into the app).

Each request's dialect (dialect.py) is picked here, at its route, and answers its errors.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

import neuronserve
from neuronserve.front import probes, proxy, request_cost, routes, schema, streamusage, tgi, version
from neuronserve.front.adapters import ADAPTER_HEADER, header_adapter, openai_with_adapter, served_model_body
from neuronserve.front.dialect import LMI, OPENAI, TGI, TGI_INVOCATIONS, Framing
from neuronserve.front.errors import (
    BadRequest,
    FrontError,
    Invalid,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    error_body,
)
from neuronserve.front.gate import BODY_KEY, request_id
from neuronserve.front.generate import Generator
from neuronserve.front.genparams import MAX_BEST_OF, MAX_CLIENT_BATCH, MAX_STOP_SEQUENCES
from neuronserve.front.metrics import CONTENT_TYPE, FrontMetrics, Scrapes
from neuronserve.front.requestrecord import REJECTED_KEY, SCHEMA_KEY, TOKENS_KEY
from neuronserve.front.state import Phase, ServerState
from neuronserve.front.support import check_openai as check_support
from neuronserve.logtext import field
from neuronserve.types import RequestSupport, ServeOptions

log = logging.getLogger("neuronserve.front")

_MODEL_ROUTES = ("/v1/completions", "/v1/chat/completions")
_RESPONSES = "/v1/responses"  # generates too: what it asks is checked
# Every allowed route whose body names the model (vLLM answers 404 to another name): served by the one
NAMED_ROUTES = (*_MODEL_ROUTES, _RESPONSES, "/v1/embeddings", "/tokenize", "/detokenize")
_CONTENT_TYPE, _ATTRIBUTES, _ACCEPT = b"content-type", b"x-amzn-sagemaker-custom-attributes", b"accept"
_ADAPTER = ADAPTER_HEADER.encode()
_INVOCATION_HEADERS = frozenset((_CONTENT_TYPE, _ATTRIBUTES, _ACCEPT, _ADAPTER))
_BODY_METHODS = ("POST", "PUT", "PATCH")


async def read_limited(request: Request, limit_bytes: int) -> bytes:
    """The body, refused with 413 as soon as it passes the limit (declared or streamed).

    isdecimal, not isdigit: a declared length "²" passed isdigit and crashed int()."""
    declared = request.headers.get("content-length")
    if declared and declared.isdecimal() and int(declared) > limit_bytes:
        raise PayloadTooLarge(
            f"payload of {declared} bytes is over the {limit_bytes}-byte limit (SAGEMAKER_MAX_PAYLOAD_IN_MB)",
        )
    parts: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit_bytes:
                raise PayloadTooLarge(
                    f"payload is over the {limit_bytes}-byte limit (SAGEMAKER_MAX_PAYLOAD_IN_MB)"
                )
            parts.append(chunk)
    except ClientDisconnect:
        raise BadRequest("the client went away before sending the whole body") from None
    return b"".join(parts)


async def body_of(request: Request, limit_bytes: int) -> bytes:
    """The body the gate already read (front/gate.py puts a whole one in the scope), else read_limited's."""
    raw = request.scope.get(BODY_KEY)
    if raw is not None and len(raw) <= limit_bytes:
        return bytes(raw)
    return await read_limited(request, limit_bytes)


def header_values(scope: Any, names: frozenset[bytes]) -> dict[bytes, str]:
    """The first value of each header in `names`, in one pass over the request's headers.

    What Starlette's `request.headers.get(name)` returns (the first match, latin-1 decoded; the
    server gives the names lower-cased, as the ASGI spec's HTTP scope says), read for four names at
    once: four lookups were four scans of the list and a Headers mapping built per request, on the
    path every /invocations takes (docs/PERFORMANCE.md, "Hot-path cuts")."""
    found: dict[bytes, str] = {}
    for name, value in scope["headers"]:
        if name in names and name not in found:
            found[name] = value.decode("latin-1")
    return found


def _record_tokens(request: Request, usage: dict[str, Any]) -> None:
    if usage:
        request.scope[TOKENS_KEY] = streamusage.counts(usage)


def openai_object(raw: bytes) -> dict[str, Any]:
    """An OpenAI model route's body, parsed once: not a JSON object is 400 (the one shape), as
    /invocations answers."""
    try:
        body = schema.load_json(raw)
    except ValueError as err:
        raise BadRequest(f"malformed JSON body ({err})") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def guarded(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """FrontError -> the one shape; anything unexpected -> 500 in the one shape and ONE log line
    (a front bug, never a traceback in the access log's way)."""

    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except FrontError as err:
            return refused(request, err)
        except Exception as err:  # the last line of defence of the one error shape
            path = request.scope.get("raw_path") or request.url.path  # as the access line writes it
            log.error(
                "front error on %s %s: %s: %s", field(request.method), field(path), type(err).__name__, err
            )
            return JSONResponse(error_body(500, "internal error in the front"), status_code=500)

    return run


def refused(request: Request, err: FrontError) -> Response:
    """A refusal in the one shape, its status recorded for the gate's rejection reasons."""
    request.scope[REJECTED_KEY] = err.status
    return with_retry_after(OPENAI.error_response(err))


def with_retry_after(resp: Response) -> Response:
    """A 429 from a handler (its sequences did not fit, request_cost.py) says when to retry, as the gate's."""
    if resp.status_code == 429:
        resp.headers["retry-after"] = "1"
    return resp


class Handlers:
    """The routes the front answers, over one server state, options and engine client."""

    def __init__(
        self,
        state: ServerState,
        opts: ServeOptions,
        client: proxy.EngineClient,
        metrics: FrontMetrics | None,
        support: RequestSupport,
    ) -> None:
        self.state, self.opts, self.client, self.metrics = state, opts, client, metrics
        self.support = support  # what requests may ask of the planned engine (plan.request_support)
        self.limit = int(opts.max_payload_mb * 1024 * 1024)
        self.scrapes = Scrapes(client.engine_metrics, opts.metrics_cache_s)
        self.gen = Generator(client, lambda: state.model_name, opts.max_sequences_per_request, support)
        # The framings of /invocations, built once: a request picks one, never builds one.
        self.lmi_framing = Framing(LMI, listed=False, jsonlines=opts.lmi_stream_format == "jsonlines")
        self.tgi_framing = {jl: Framing(TGI_INVOCATIONS, listed=True, jsonlines=jl) for jl in (False, True)}

    async def metrics_route(self, _: Request) -> Response:
        """Front series always (also while STAGING/LOADING); the engine's once it runs, never waiting
        more than ENGINE_SCRAPE_TIMEOUT_S on a saturated engine; a few scrapes at once, the engine's
        text cached for NEURONSERVE_METRICS_CACHE_S (metrics.Scrapes)."""
        metrics, client = self.metrics, self.client
        engine = self.state.phase in (Phase.READY, Phase.DRAINING)

        def front() -> bytes:
            own = metrics.render() if metrics is not None else b""
            return own + client.replica_counts() if engine else own

        return Response(await self.scrapes.body(front, engine), media_type=CONTENT_TYPE)

    async def ping(self, _: Request) -> Response:
        return probes.ping(self.state)

    async def live(self, _: Request) -> Response:
        return probes.live(self.state)

    async def health(self, _: Request) -> Response:
        if self.state.ready():
            return Response(status_code=200)
        return JSONResponse(tgi.error_body(503, "unhealthy") | {"error_type": "healthcheck"}, status_code=503)

    async def info(self, _: Request) -> Response:
        state = self.state
        limits = {"best_of": MAX_BEST_OF, "stop": MAX_STOP_SEQUENCES, "batch": MAX_CLIENT_BATCH}
        return JSONResponse(
            tgi.info(
                model_id=state.model_name,
                dtype=state.model_dtype,
                device=state.device,
                max_model_len=state.max_model_len,
                max_concurrency=self.opts.max_concurrency,
                version=neuronserve.__version__,
                limits=limits,
            )
            | {"stack": dict(state.stack)}  # the lane (plan/lanes/registry.py): an extension of TGI's Info
        )

    async def invocations(self, request: Request) -> Response:
        given = header_values(request.scope, _INVOCATION_HEADERS)
        schema.check_content_type(given.get(_CONTENT_TYPE))
        raw = await body_of(request, self.limit)
        route = schema.route_from_attributes(given.get(_ATTRIBUTES))
        if route is not None and not routes.is_allowed(route, self.opts.expose_engine_routes):
            raise NotFound(routes.refusal(route))  # the allowlist also holds for routed requests
        body = schema.parse_body(raw)
        rid = request_id(request.scope)
        headers = {"content-type": "application/json", "x-request-id": rid}
        accept = given.get(_ACCEPT)
        if accept:
            headers["accept"] = accept
        request.scope[SCHEMA_KEY] = "routed"
        named = header_adapter(given.get(_ADAPTER))  # SageMaker's: front/adapters.py
        if route is None:
            kind, path = schema.classify(body)
            request.scope[SCHEMA_KEY] = kind
            if kind == "tgi":
                # the request's dialect, picked once: LMI, or TGI framed by the client's Accept
                lmi = self.opts.dialect == "lmi"
                framing = self.lmi_framing if lmi else self.tgi_framing["jsonlines" in (accept or "")]
                record, charge = _recorder(request), _charger(request)
                return await self.gen.serve(body, framing, rid, record, charge, adapter=named)
        else:
            path = route
        if named is not None:
            raw = openai_with_adapter(body, named, self.support)
        adapter = self.check_openai(request, path, body)
        if path in NAMED_ROUTES:
            raw = served_model_body(body, self.state, self.opts, adapter) or raw
        tap, raw = streamusage.prepare(body, path, raw)
        resp = await proxy.send(self.client, "POST", path, headers=headers, content=raw)
        out = await proxy.relay(resp, _recorder(request), tap)
        if request.method == "GET" and request.url.path == version.PATH:  # (request.url is built on use)
            return version.answer(out, neuronserve.__version__, self.state.stack)
        return out

    def check_openai(self, request: Request, path: str, body: dict[str, Any]) -> bool:
        """The engine's advisories, the sequences of one request and their weight (request_cost.py), then
        on the generating routes what the planned engine can serve (support.py). True: the body's `model`
        names a served LoRA adapter."""
        opts = self.opts
        request_cost.check_openai(
            request.scope, path, body, opts.max_sequences_per_request, opts.allow_prompt_embeds
        )
        if path in _MODEL_ROUTES or path == _RESPONSES:
            return check_support(body, self.support)
        return False

    def tgi_route(self, stream: bool | None, listed: bool) -> Callable[[Request], Awaitable[Response]]:
        """One of TGI's generate routes: TGI's dialect with its own errors, framed by the route."""
        framing = Framing(TGI, listed=listed, stream=stream)

        async def handle(request: Request) -> Response:
            try:
                schema.check_content_type(request.headers.get("content-type"))
                body = schema.parse_body(await body_of(request, self.limit))
                if "inputs" not in body:
                    raise Invalid("missing field 'inputs'")
            except FrontError as err:
                return TGI.error_response(err)
            rid = request_id(request.scope)
            return await self.gen.serve(body, framing, rid, _recorder(request), _charger(request))

        return handle

    async def engine_route(self, request: Request) -> Response:
        allowed = routes.ANSWERED.get(request.url.path)
        if allowed is not None:  # a front route with another method: never forwarded
            raise MethodNotAllowed(
                f"{request.method} is not allowed on {request.url.path}; use {', '.join(allowed)}"
            )
        raw = await body_of(request, self.limit)
        headers = proxy.forward_headers(request.headers.items())
        headers["x-request-id"] = request_id(request.scope)
        tap = None
        if raw and request.method in _BODY_METHODS:
            if request.url.path in NAMED_ROUTES:
                body = openai_object(raw)
                adapter = self.check_openai(request, request.url.path, body)
                raw = served_model_body(body, self.state, self.opts, adapter) or raw
                tap, raw = streamusage.prepare(body, request.url.path, raw)
            else:
                # 400 for bodies too deep for the engine's parser; not JSON: the engine answers
                parsed = None
                with contextlib.suppress(ValueError):
                    parsed = schema.load_json(raw)
                if isinstance(parsed, dict):
                    self.check_openai(request, request.url.path, parsed)
        path = request.scope.get("raw_path") or request.url.path.encode()  # as the client encoded it
        resp = await proxy.send(
            self.client,
            request.method,
            path.decode("latin-1"),
            headers=headers,
            content=raw or None,
            params=request.url.query or None,
        )
        out = await proxy.relay(resp, _recorder(request), tap)
        if request.url.path == version.PATH and request.method == "GET":
            return version.answer(out, neuronserve.__version__, self.state.stack)
        return out


def _recorder(request: Request) -> Callable[[dict[str, Any]], None]:
    return lambda usage: _record_tokens(request, usage)


def _charger(request: Request) -> Callable[[int], None]:
    return lambda sequences: request_cost.charge(request.scope, sequences)
