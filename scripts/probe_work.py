"""Hostile requests of docs/RELIABILITY.md ("Hostile inputs tried": the work, sessions and parsing
rows, and the advisories) against the front in process, in front of a counting stand-in engine.

Runs against whichever neuronserve is on PYTHONPATH, so the same probe gives the "before" column
(PYTHONPATH=<old checkout>/src PYTHONDONTWRITEBYTECODE=1) and the "now" column. It uses only APIs
both have: create_app, Gate, make_client, SessionStore/SessionScope. Prints one line per input.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
from aiohttp import web

from neuronserve.front import proxy
from neuronserve.front.app import create_app
from neuronserve.front.gate import Gate
from neuronserve.front.sessions import SessionScope, SessionStore
from neuronserve.front.state import Phase, ServerState
from neuronserve.types import ServeOptions

CHAT = {"messages": [{"role": "user", "content": "x"}]}
SAMPLE = {"do_sample": True}


class One:
    index = 0

    def __init__(self) -> None:
        self.replicas = [self]

    def pick(self, _: object) -> One:
        return self


async def engine(hits: dict[str, int], delay: float) -> web.AppRunner:
    async def any_route(request: web.Request) -> web.Response:
        hits[request.path] = hits.get(request.path, 0) + 1
        if request.path == "/metrics":
            return web.Response(text="vllm:x 0\n")
        await asyncio.sleep(delay)
        if request.path == "/v1/completions":
            sent = await request.json()
            n = sent.get("n", 1) if isinstance(sent.get("n"), int) else 1
            choices = [{"index": i, "text": "ok", "finish_reason": "length"} for i in range(n)]
            return web.json_response({"choices": choices, "usage": {}})
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{t:.*}", any_route)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


async def front(hits: dict[str, int], delay: float = 0.0, pool: int = 0) -> tuple[Any, Any, Any]:
    runner = await engine(hits, delay)
    state = ServerState()
    state.move(Phase.LOADING)
    state.set_engine_health(True)
    state.move(Phase.READY)
    client = proxy.make_client(f"http://127.0.0.1:{runner.addresses[0][1]}", 60.0, pool)
    opts = ServeOptions()
    store = SessionStore(60.0)
    app = SessionScope(create_app(state, opts, client), store, One(), One(), 6 << 20)  # type: ignore[arg-type]
    gate = Gate(app, state, opts.max_concurrency)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=gate), base_url="http://front", timeout=60)
    return http, (runner, client), store


async def probe(name: str, path: str, body: Any, headers: dict[str, str] | None = None) -> None:
    hits: dict[str, int] = {}
    http, (runner, client), _ = await front(hits)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    try:
        r = await http.post(
            path, content=raw, headers={"content-type": "application/json", **(headers or {})}
        )
        said = f"{r.status_code} {r.text[:110]!r}"
    except Exception as err:  # what escapes the app is what uvicorn answers a bare 500 to
        said = f"unhandled {type(err).__name__} (uvicorn: bare 500 + traceback)"
    reached = sum(v for k, v in hits.items() if k != "/metrics")
    print(f"{name}: {said} engine_requests={reached}")
    await http.aclose()
    await client.aclose()
    await runner.cleanup()


async def scrapes() -> None:
    hits: dict[str, int] = {}
    http, (runner, client), _ = await front(hits)
    answers = await asyncio.gather(*(http.get("/metrics") for _ in range(300)))
    codes = sorted({a.status_code for a in answers})
    print(f"300 concurrent /metrics: statuses {codes}, engine /metrics fetches {hits.get('/metrics', 0)}")
    await http.aclose()
    await client.aclose()
    await runner.cleanup()


async def sessions() -> None:
    http, (runner, client), store = await front({})
    head = {"x-amzn-sagemaker-session-id": "NEW_SESSION", "content-type": "application/json"}
    codes: dict[int, int] = {}
    start = time.monotonic()
    for _ in range(20_000):
        r = await http.post("/invocations", content=b'{"requestType": "NEW_SESSION"}', headers=head)
        codes[r.status_code] = codes.get(r.status_code, 0) + 1
    took = time.monotonic() - start
    print(f"20000 NEW_SESSION: {codes} in {took:.1f} s, table size {len(store)}")
    await http.aclose()
    await client.aclose()
    await runner.cleanup()


async def pool_wait() -> None:
    """300 requests on 256 connections (the old pool for the default limit) to an engine that takes
    6 s: the ones that wait for a connection past the old 5 s connect timeout failed."""
    hits: dict[str, int] = {}
    http, (runner, client), _ = await front(hits, delay=6.0, pool=256)
    body = {"inputs": "x", "parameters": {"max_new_tokens": 1}}
    front_calls = [http.post("/generate", json=body) for _ in range(250)]
    direct = [client.request("POST", "/v1/completions", None, b'{"n": 1}') for _ in range(50)]
    done = await asyncio.gather(*front_calls, *direct, return_exceptions=True)
    answers, more = [a for a in done[:250] if not isinstance(a, BaseException)], done[250:]
    for failed in (a for a in done[:250] if isinstance(a, BaseException)):
        more.append(failed)
    codes: dict[str, int] = {}
    for a in answers:
        codes[str(a.status_code)] = codes.get(str(a.status_code), 0) + 1
    for m in more:
        key = type(m).__name__ if isinstance(m, BaseException) else str(m.status)
        codes[key] = codes.get(key, 0) + 1
    print(f"300 requests on a 256-connection pool, engine 6 s: {codes}")
    await http.aclose()
    await client.aclose()
    await runner.cleanup()


async def main() -> None:
    await probe("completions 64 prompts", "/v1/completions", {"prompt": ["p"] * 64})
    await probe("completions n=64", "/v1/completions", {"prompt": "p", "n": 64})
    await probe("completions 64 prompts x n=8", "/v1/completions", {"prompt": ["p"] * 64, "n": 8})
    await probe(
        "TGI 32 inputs x best_of=8", "/", {"inputs": ["p"] * 32, "parameters": {**SAMPLE, "best_of": 8}}
    )
    await probe("chat n=40 on /invocations", "/invocations", {**CHAT, "n": 40})
    deep = b'{"requestType": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    await probe(
        "session body nested 100k", "/invocations", deep, {"x-amzn-sagemaker-session-id": "NEW_SESSION"}
    )
    grammar = {"inputs": "x", "parameters": {"grammar": {"type": "json", "value": "[" * 100_000}}}
    await probe("TGI grammar nested 100k", "/generate", grammar)
    temp = b'{"inputs": "x", "parameters": {"temperature": 1' + b"0" * 400 + b"}}"
    await probe("TGI temperature 10**400", "/generate", temp)
    await probe(
        "chat_template_kwargs tokenize",
        "/v1/chat/completions",
        {**CHAT, "chat_template_kwargs": {"tokenize": True}},
    )
    await probe(
        "/tokenize chat_template_kwargs", "/tokenize", {**CHAT, "chat_template_kwargs": {"tokenize": True}}
    )
    await probe("prompt_embeds", "/v1/completions", {"prompt": "", "prompt_embeds": "UEsDBA=="})
    part = {"type": "image_embeds", "image_embeds": "AA=="}
    await probe(
        "image_embeds part", "/v1/chat/completions", {"messages": [{"role": "user", "content": [part]}]}
    )
    await scrapes()
    await sessions()
    await pool_wait()


if __name__ == "__main__":
    asyncio.run(main())
