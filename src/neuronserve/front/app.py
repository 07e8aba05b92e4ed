"""Routes: /ping from state, /invocations by schema, everything else proxied to the engine."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from starlette.background import BackgroundTask
from starlette.responses import JSONResponse, Response, StreamingResponse

from neuronserve.front import proxy, routes, schema, tgi
from neuronserve.front.errors import FrontError, error_body
from neuronserve.front.gate import REJECTED_KEY, SCHEMA_KEY, TOKENS_KEY
from neuronserve.front.metrics import CONTENT_TYPE, FrontMetrics, engine_metrics
from neuronserve.front.sse import SSEParser
from neuronserve.front.state import Phase, ServerState
from neuronserve.types import ServeOptions

log = logging.getLogger("neuronserve.front")


async def read_limited(request: Request, limit_bytes: int) -> bytes:
    """The body, refused with 413 as soon as it passes the limit (declared or streamed)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit_bytes:
        raise FrontError(
            413,
            f"payload of {declared} bytes is over the {limit_bytes}-byte limit (SAGEMAKER_MAX_PAYLOAD_IN_MB)",
        )
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit_bytes:
            raise FrontError(
                413, f"payload is over the {limit_bytes}-byte limit (SAGEMAKER_MAX_PAYLOAD_IN_MB)"
            )
        parts.append(chunk)
    return b"".join(parts)


def _record_tokens(request: Request, usage: dict[str, Any]) -> None:
    if usage:
        request.scope[TOKENS_KEY] = (usage.get("prompt_tokens"), usage.get("completion_tokens"))


def create_app(
    state: ServerState,
    opts: ServeOptions,
    client: proxy.EngineClient,
    metrics: FrontMetrics | None = None,
) -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    limit = int(opts.max_payload_mb * 1024 * 1024)

    @app.exception_handler(FrontError)
    async def _front_error(request: Request, err: FrontError) -> JSONResponse:
        request.scope[REJECTED_KEY] = err.status  # counted by the gate as a rejection reason
        return JSONResponse(error_body(err.status, err.message), status_code=err.status)

    async def metrics_route(_: Request) -> Response:
        """Front series always (also while STAGING/LOADING); the engine's once it runs, never waiting
        more than ENGINE_SCRAPE_TIMEOUT_S on a saturated engine."""
        body = metrics.render() if metrics is not None else b""
        if state.phase in (Phase.READY, Phase.DRAINING):
            body += await engine_metrics(client.session(), client.base_url)
        return Response(body, media_type=CONTENT_TYPE)

    async def ping(_: Request) -> Response:
        if state.ready():
            return Response(status_code=200)
        return JSONResponse(state.ping_body(), status_code=503)

    async def invocations(request: Request) -> Response:
        schema.check_content_type(request.headers.get("content-type"))
        raw = await read_limited(request, limit)
        route = schema.route_from_attributes(request.headers.get("x-amzn-sagemaker-custom-attributes"))
        if route is not None and not routes.is_allowed(route, opts.expose_engine_routes):
            raise FrontError(404, routes.refusal(route))  # the allowlist also holds for routed requests
        body = schema.parse_body(raw)
        headers = {"content-type": "application/json"}
        accept = request.headers.get("accept")
        if accept:
            headers["accept"] = accept
        request.scope[SCHEMA_KEY] = "routed"
        if route is None:
            kind, path = schema.classify(body)
            request.scope[SCHEMA_KEY] = kind
            if kind == "tgi":
                return await _generate(request, body, accept or "")
        else:
            path = route
        resp = await proxy.send(client, "POST", path, headers=headers, content=raw)
        usage: dict[str, Any] = {}
        out = await proxy.relay(resp, usage)
        _record_tokens(request, usage)
        return out

    async def _generate(request: Request, body: dict[str, Any], accept: str) -> Response:
        req, engine_body = tgi.translate_request(body, state.model_name)
        content = json.dumps(engine_body).encode()
        resp = await proxy.send(
            client, "POST", "/v1/completions", headers={"content-type": "application/json"}, content=content
        )
        if resp.status != 200:
            return await proxy.relay(resp)  # engine errors keep their status and message
        if not req.stream:
            engine_json = json.loads(await proxy.read_body(resp))
            answer, _ = tgi.translate_response(req, engine_json)
            _record_tokens(request, engine_json.get("usage") or {})
            return JSONResponse(answer)
        jsonlines = "jsonlines" in accept
        translator = tgi.StreamTranslator(req)

        async def events() -> AsyncIterator[bytes]:
            parser = SSEParser()
            try:
                async for chunk in proxy.chunks(resp):
                    for data in parser.feed(chunk):
                        for event in translator.feed(data):
                            yield tgi.encode_event(event, jsonlines)
                for data in parser.close():
                    for event in translator.feed(data):
                        yield tgi.encode_event(event, jsonlines)
            except proxy.StreamBroken as err:
                # TGI's own in-band error event: the 200 is already sent, so the stream says why it ends.
                log.warning("TGI stream from the engine broke: %s", err.message)
                error_type = "overloaded" if err.status == 503 else "incomplete_generation"
                yield tgi.encode_event({"error": err.message, "error_type": error_type}, jsonlines)
            finally:
                proxy.done(resp)
                _record_tokens(request, translator.usage)

        media = "application/jsonlines" if jsonlines else "text/event-stream"
        return StreamingResponse(events(), media_type=media, background=BackgroundTask(proxy.done, resp))

    async def engine_route(request: Request) -> Response:
        raw = await read_limited(request, limit)
        headers = proxy.forward_headers(request.headers.items())
        path = request.scope.get("raw_path") or request.url.path.encode()  # as the client encoded it
        resp = await proxy.send(
            client,
            request.method,
            path.decode("latin-1"),
            headers=headers,
            content=raw or None,
            params=request.url.query or None,
        )
        usage: dict[str, Any] = {}
        out = await proxy.relay(resp, usage)
        _record_tokens(request, usage)
        return out

    # Plain Starlette routes inside the FastAPI app: FastAPI's per-request dependency solving and
    # response handling cost about a millisecond of CPU per request here, which at 32 concurrent
    # generations on a small host is CPU the engine needs (docs/PERFORMANCE.md, "Serving overhead").
    app.add_route("/ping", ping, methods=["GET", "POST"])
    app.add_route("/metrics", metrics_route, methods=["GET"])
    app.add_route("/invocations", invocations, methods=["POST"])
    app.add_route("/{path:path}", engine_route, methods=["GET", "POST", "PUT", "DELETE", "PATCH"])
    return app
