"""The front's ASGI app: the routes of the one route table (routes.TABLE), the generating ones straight to
their handlers.

Why two ways in: every route is a plain Starlette route inside a FastAPI app (FastAPI's per-request
dependency solving and response handling cost about a millisecond of CPU per request: docs/
PERFORMANCE.md, "Serving overhead"), but even plain, Starlette's middleware stack, route matching and
per-request wrappers were a sizeable part of the front's CPU per request under load ("Front ceiling").
So a POST to a route that generates (/invocations, TGI's generate routes, the OpenAI routes the
front checks and forwards) goes from `HotRoutes` to its handler by one dictionary lookup, and its
answer goes out as the handler made it. Everything else (other methods, /ping, /metrics, the engine's
other routes) takes the FastAPI app as before. Both ways run the same handlers in the same guard
(handlers.guarded: a FrontError is answered in its dialect, anything else is a 500 in the one shape).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from neuronserve.front import proxy, routes
from neuronserve.front.errors import FrontError, error_body
from neuronserve.front.handlers import NAMED_ROUTES, Handlers, guarded, openai_object, read_limited, refused
from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.state import ServerState
from neuronserve.types import RequestSupport, ServeOptions

__all__ = ["HotRoutes", "create_app", "openai_object", "read_limited"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Handler = Callable[[Request], Awaitable[Response]]


class HotRoutes:
    """POSTs to `hot` paths straight to their (guarded) handlers; everything else to `app`."""

    def __init__(self, app: ASGIApp, hot: dict[str, Handler]) -> None:
        self.app = app
        self.hot = hot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = (
            self.hot.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        )
        if handler is None:
            await self.app(scope, receive, send)
            return
        response = await handler(Request(scope, receive))
        await response(scope, receive, send)


def create_app(
    state: ServerState,
    opts: ServeOptions,
    client: proxy.EngineClient,
    metrics: FrontMetrics | None = None,
    support: RequestSupport | None = None,
) -> HotRoutes:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    front = Handlers(state, opts, client, metrics, support or RequestSupport())

    @app.exception_handler(FrontError)
    async def _front_error(request: Request, err: FrontError) -> Response:
        return refused(request, err)

    @app.exception_handler(HTTPException)
    async def _http_error(_: Request, err: HTTPException) -> JSONResponse:
        return JSONResponse(
            error_body(err.status_code, str(err.detail)), status_code=err.status_code, headers=err.headers
        )

    handlers: dict[str, Handler] = {
        "/ping": front.ping,
        "/live": front.live,
        "/metrics": front.metrics_route,
        "/invocations": guarded(front.invocations),
        "/generate": guarded(front.tgi_route(False, listed=False)),
        "/generate_stream": guarded(front.tgi_route(True, listed=False)),
        "/": guarded(front.tgi_route(None, listed=True)),
        "/info": guarded(front.info),
        "/health": front.health,
    }
    for path, methods in routes.ANSWERED.items():
        app.add_route(path, handlers[path], methods=list(methods))
    engine_route = guarded(front.engine_route)
    app.add_route("/{path:path}", engine_route, methods=["GET", "POST", "PUT", "DELETE", "PATCH"])
    hot = {path: handlers[path] for path, methods in routes.ANSWERED.items() if "POST" in methods}
    del hot["/ping"]  # ungated and answered from state: nothing to gain
    hot |= {path: engine_route for path in NAMED_ROUTES}
    return HotRoutes(app, hot)
