"""The route allowlist: which paths the front serves or forwards; every other path is 404.

Why an allowlist, not a blocklist: the engine's HTTP surface grows with every vLLM release and holds
admin routes (`/scale_elastic_ep` rescales the engine, `/collective_rpc`, `/sleep`, `/reset_prefix_cache`,
LoRA loading, the profiler, `/openapi.json` and `/docs`). On ECS or `docker run`, port 8080 is often
reachable from a whole VPC, so an unknown route must never reach the engine by default. A new vLLM
route stays refused until someone adds it here on purpose (tests/unit/front/test_routes.py walks
every route vLLM 0.11.0 and the installed vLLM register).

Matching is on the exact decoded path (no prefixes, no trailing slash): `/v1/completions/../x` or
`/tokenize%2F..%2Fx` are different paths and refused. `NEURONSERVE_EXPOSE_ENGINE_ROUTES=true` forwards
everything else to the engine as before (with a warning at start).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    """One path the front serves or forwards.

    `origins` says whose path it is: "front" (SageMaker's contract and ours), "tgi" (TGI's router:
    `/generate`, `/generate_stream`, `/` (compat generate), `/info`, `/health`, served by the front's
    TGI translation), "engine" (the inference routes a client of an OpenAI-compatible server calls, plus
    the small read-only helpers). `methods`: answered by the front itself with these methods, any other
    method is 405; empty: forwarded to the engine with the client's method.
    """

    path: str
    origins: frozenset[str]
    methods: tuple[str, ...] = ()
    gated: bool = True  # False: /ping, /live and /metrics answer in every phase, outside the gate
    generate: bool = False  # a TGI generate route (its requests count under the "tgi" schema)


def _route(path: str, origins: str, methods: str = "", **kw: bool) -> Route:
    return Route(path, frozenset(origins.split()), tuple(methods.split()), **kw)


# The one route table: the app's routes (in this order), the allowlist and the 405 answers.
TABLE: tuple[Route, ...] = (
    _route("/ping", "front", "GET POST", gated=False),
    _route("/live", "front", "GET", gated=False),  # liveness (front/state.py live); HEAD comes with GET
    _route("/metrics", "front", "GET", gated=False),
    _route("/invocations", "front", "POST"),
    _route("/generate", "tgi", "POST", generate=True),
    _route("/generate_stream", "tgi", "POST", generate=True),
    _route("/", "tgi", "POST", generate=True),
    _route("/info", "tgi", "GET"),
    _route("/health", "tgi engine", "GET"),  # also vLLM's own liveness route: answered by the front
    _route("/v1/chat/completions", "engine"),
    _route("/v1/completions", "engine"),
    _route("/v1/models", "engine"),
    _route("/v1/embeddings", "engine"),
    _route("/v1/responses", "engine"),
    _route("/tokenize", "engine"),
    _route("/detokenize", "engine"),
    _route("/version", "engine"),
)

FRONT_ROUTES = frozenset(r.path for r in TABLE if "front" in r.origins)
TGI_ROUTES = frozenset(r.path for r in TABLE if "tgi" in r.origins)
ENGINE_ROUTES = frozenset(r.path for r in TABLE if "engine" in r.origins)
ALLOWED = frozenset(r.path for r in TABLE)
ANSWERED: dict[str, tuple[str, ...]] = {r.path: r.methods for r in TABLE if r.methods}
UNGATED = frozenset(r.path for r in TABLE if not r.gated)
GENERATE_ROUTES = frozenset(r.path for r in TABLE if r.generate)


def is_allowed(path: str, expose_engine_routes: bool = False) -> bool:
    """True when `path` (decoded, as in the ASGI scope) may be served or forwarded."""
    return expose_engine_routes or path in ALLOWED


def refusal(path: str) -> str:
    """The 404 message: says why and how to opt in, so a user of an engine route is not left guessing."""
    shown = path if len(path) <= 200 else path[:200] + "..."
    return (
        f"no route {shown!r}: the server exposes /ping, /live, /invocations, the TGI routes and the OpenAI "
        "inference routes; set NEURONSERVE_EXPOSE_ENGINE_ROUTES=true to forward every engine route"
    )
