"""Work per request against the real front (tests/support/front_app.py): the sequence limit in every
dialect's error shape, the sequences weighed against NEURONSERVE_MAX_CONCURRENCY, the engine pool
that waits instead of failing, and /metrics scrapes that share one engine fetch."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiohttp import web
from tests.support.aiohttp_engine import engine
from tests.support.front_app import running_front

from neuronserve.front import proxy
from neuronserve.front.request_cost import openai_sequences

VAR = "NEURONSERVE_MAX_SEQUENCES_PER_REQUEST"
SAMPLE = {"do_sample": True, "max_new_tokens": 2}


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        ("/v1/completions", {"prompt": "x"}, 1),
        ("/v1/completions", {"prompt": [1, 2, 3]}, 1),  # token ids: one prompt
        ("/v1/completions", {"prompt": ["a"] * 64}, 64),
        ("/v1/completions", {"prompt": [[1], [2]], "n": 8}, 16),
        ("/v1/completions", {"prompt": ["a"] * 4, "n": 2, "best_of": 5}, 20),
        ("/v1/chat/completions", {"messages": [], "n": 64}, 64),
        # vLLM's pydantic (lax) reads these as whole numbers: they count as such
        ("/v1/chat/completions", {"messages": [], "n": "64"}, 64),
        ("/v1/completions", {"prompt": ["a"] * 4, "n": 8.0}, 32),
        ("/v1/completions", {"prompt": "a", "n": " +1_0 ", "best_of": "12.00"}, 12),
        ("/v1/completions", {"prompt": "a", "n": "9" * 40}, 10**18),
        # what it refuses is its to refuse: one sequence here
        ("/v1/chat/completions", {"messages": [], "n": "6e1"}, 1),
        ("/v1/chat/completions", {"messages": [], "n": 64.5}, 1),
        ("/v1/chat/completions", {"messages": [], "n": True}, 1),
        ("/v1/embeddings", {"input": ["a", "b", "c"]}, 3),
        ("/tokenize", {"prompt": ["a", "b"]}, 1),
    ],
)
def test_sequences_of_an_openai_body(path: str, body: dict[str, Any], expected: int) -> None:
    assert openai_sequences(path, body) == expected


# (path, body, status, the error's message field) for requests over the default limit (32)
OVER: list[tuple[str, dict[str, Any], dict[str, object], int]] = [
    ("/v1/completions", {"prompt": ["p"] * 64}, {}, 400),
    ("/v1/completions", {"prompt": "p", "n": 64}, {}, 400),
    ("/v1/completions", {"prompt": ["p"] * 64, "n": 8}, {}, 400),  # 512 sequences
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "n": 33}, {}, 400),
    ("/v1/completions", {"prompt": ["p"] * 32, "n": "64"}, {}, 400),  # the engine reads "64" as 64
    ("/invocations", {"prompt": ["p"] * 64}, {}, 400),
    ("/invocations", {"messages": [{"role": "user", "content": "x"}], "n": 40}, {}, 400),
    ("/", {"inputs": ["p"] * 32, "parameters": {**SAMPLE, "best_of": 8}}, {}, 422),  # TGI list
    (
        "/generate",
        {"inputs": "p", "parameters": {**SAMPLE, "best_of": 8}},
        {"max_sequences_per_request": 4},
        422,
    ),
    ("/invocations", {"inputs": ["p"] * 32, "parameters": {**SAMPLE, "best_of": 8}}, {}, 422),
    ("/", {"inputs": ["p"] * 64}, {}, 422),  # a list over the limit, before the dialect's list cap
    ("/invocations", {"inputs": ["p"] * 40}, {"dialect": "lmi"}, 424),
    ("/invocations", {"inputs": ["p"] * 9, "parameters": {**SAMPLE, "n": 4}}, {"dialect": "lmi"}, 424),
]


def _message(path: str, body: dict[str, Any], opts: dict[str, object], data: Any) -> str:
    """The refusal text in the route's own shape (asserting the shape on the way)."""
    if path in ("/", "/generate"):  # TGI's ErrorResponse
        assert data["error_type"] == "validation"
        return str(data["error"])
    if opts.get("dialect") == "lmi" and "inputs" in body:  # LMI's {"error", "code"}
        assert data["code"] == 424
        return str(data["error"])
    assert data["error"]["code"] in (400, 422)  # the one shape
    return str(data["error"]["message"])


@pytest.mark.parametrize(("path", "body", "opts", "status"), OVER)
def test_too_many_sequences_refused_in_every_dialect(
    path: str, body: dict[str, Any], opts: dict[str, object], status: int
) -> None:
    async def go() -> None:
        async with running_front(**opts) as front:
            r = await front.client.post(path, json=body)
            assert r.status_code == status, r.text
            assert VAR in _message(path, body, opts, r.json())
            assert front.seen == [], "a refused request reached the engine"

    asyncio.run(go())


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", {"prompt": ["p"] * 4, "n": 8}),  # exactly 32
        ("/", {"inputs": ["p"] * 8, "parameters": {**SAMPLE, "best_of": 4}}),
        ("/invocations", {"messages": [{"role": "user", "content": "x"}], "n": 32}),
    ],
)
def test_at_the_limit_is_served(path: str, body: dict[str, Any]) -> None:
    async def go() -> None:
        async with running_front() as front:
            r = await front.client.post(path, json=body)
            assert r.status_code == 200, r.text
            assert front.gate.in_flight == 0

    asyncio.run(go())


def test_sequences_count_against_the_concurrency_limit() -> None:
    """8 sequences in flight of 10 slots: a 3-sequence request is 429, a 2-sequence one fits; every
    slot is given back at the end (the drain waits on this count)."""

    async def go() -> None:
        async with running_front(max_concurrency=10, engine_delay_s=0.6) as front:
            c = front.client
            heavy = asyncio.create_task(c.post("/v1/completions", json={"prompt": ["p"] * 8}))
            for _ in range(100):
                if front.gate.in_flight == 8:
                    break
                await asyncio.sleep(0.01)
            assert front.gate.in_flight == 8
            refused = await c.post("/v1/completions", json={"prompt": "p", "n": 3})
            assert refused.status_code == 429, refused.text
            assert refused.headers["retry-after"] == "1"
            assert "NEURONSERVE_MAX_CONCURRENCY" in refused.json()["error"]["message"]
            tgi = await c.post("/", json={"inputs": ["p"] * 3, "parameters": SAMPLE})
            assert tgi.status_code == 429 and tgi.json()["error_type"] == "overloaded"
            assert tgi.headers["retry-after"] == "1"
            fits = await c.post("/v1/chat/completions", json={"messages": [], "n": 2})
            assert fits.status_code == 200, fits.text
            assert (await heavy).status_code == 200
            assert front.gate.in_flight == 0
            text = (await c.get("/metrics")).text
            assert 'neuronserve_rejected_total{reason="limit"} 2.0' in text

    asyncio.run(go())


def test_a_request_heavier_than_the_whole_limit_runs_alone() -> None:
    async def go() -> None:
        async with running_front(max_concurrency=4) as front:
            r = await front.client.post("/v1/completions", json={"prompt": ["p"] * 6})
            assert r.status_code == 200, r.text
            assert front.gate.in_flight == 0

    asyncio.run(go())


def test_pool_size_is_apart_from_the_gate() -> None:
    assert proxy.pool_size(256) == 288
    assert proxy.pool_size(8) == proxy.MIN_POOL
    assert proxy.pool_size(0) == proxy.UNLIMITED_POOL
    assert proxy.pool_size(256, 40) == 40


def test_waiting_for_a_pooled_connection_is_not_a_connect_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """12 requests on 2 connections to an engine that takes 0.25 s each: they queue for about 1.5 s,
    far past the 0.2 s connect timeout, and all succeed (aiohttp's `connect` timeout covers the
    pool wait, which failed such requests after 5 s)."""
    monkeypatch.setattr(proxy, "CONNECT_TIMEOUT_S", 0.2)

    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(0.25)
        return web.json_response({"ok": True})

    async def one(client: proxy.EngineClient) -> int:
        resp = await proxy.send(client, "POST", "/v1/completions", content=b"{}")
        await proxy.read_body(resp)
        return resp.status

    async def go() -> None:
        async with engine(slow) as url:
            client = proxy.make_client(url, 30.0, 2)
            try:
                start = time.monotonic()
                statuses = await asyncio.gather(*(one(client) for _ in range(12)))
                assert statuses == [200] * 12
                assert time.monotonic() - start >= 1.2  # they really waited for the 2 connections
            finally:
                await client.aclose()

    asyncio.run(go())


def test_concurrent_scrapes_share_a_few_engine_fetches() -> None:
    async def go() -> None:
        async with running_front() as front:
            answers = await asyncio.gather(*(front.client.get("/metrics") for _ in range(300)))
            assert all(r.status_code == 200 for r in answers)
            assert all("vllm:num_requests_running" in r.text for r in answers)
            assert all("neuronserve_in_flight" in r.text for r in answers)
            fetched = sum(1 for _, path in front.seen if path == "/metrics")
            assert 1 <= fetched <= 3, fetched

    asyncio.run(go())


def test_scrape_cache_expires() -> None:
    async def go() -> None:
        async with running_front(metrics_cache_s=0.0) as front:
            for _ in range(3):
                assert (await front.client.get("/metrics")).status_code == 200
            assert sum(1 for _, path in front.seen if path == "/metrics") == 3

    asyncio.run(go())
