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

# Answered by the front itself.
FRONT_ROUTES = frozenset({"/ping", "/invocations", "/metrics"})

# TGI's own routes (text-generation-inference's router: `/generate`, `/generate_stream`, `/` (compat
# generate), `/info`, `/health`), served by the front's TGI translation.
TGI_ROUTES = frozenset({"/generate", "/generate_stream", "/", "/info", "/health"})

# The engine's inference routes a client of an OpenAI-compatible server calls, plus the small
# read-only helpers. `/health` is also vLLM's own liveness route (and TGI's).
ENGINE_ROUTES = frozenset(
    {
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/models",
        "/v1/embeddings",
        "/v1/responses",
        "/tokenize",
        "/detokenize",
        "/version",
        "/health",
    }
)

ALLOWED = FRONT_ROUTES | TGI_ROUTES | ENGINE_ROUTES


def is_allowed(path: str, expose_engine_routes: bool = False) -> bool:
    """True when `path` (decoded, as in the ASGI scope) may be served or forwarded."""
    return expose_engine_routes or path in ALLOWED


def refusal(path: str) -> str:
    """The 404 message: says why and how to opt in, so a user of an engine route is not left guessing."""
    shown = path if len(path) <= 200 else path[:200] + "..."
    return (
        f"no route {shown!r}: the server exposes /ping, /invocations, the TGI routes and the OpenAI "
        "inference routes; set NEURONSERVE_EXPOSE_ENGINE_ROUTES=true to forward every engine route"
    )
