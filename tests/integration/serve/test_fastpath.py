"""The fast path (serve/fastpath.py) against the usual path, through the real front stack.

Two fronts are built as a front process builds itself (serve/frontstack.py `build_front`: the router
over a replica, the replica scope, the gate, the worker tag, the front's connections), one with
NEURONSERVE_FAST_PATH on, one with it off, both over the same stand-in engine (aiohttp, answering as
vLLM's OpenAI server does). Each case sends the same raw bytes to both and compares what comes back,
byte for byte but the `date` header; and checks which path the fast front took (`FastPath.taken`),
so a fast path that silently never runs fails here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from aiohttp import web

from neuronserve.engine.pool import RPhase
from neuronserve.front.limiter import Limiter
from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.state import Phase, ServerState
from neuronserve.serve.fastpath import FastPath
from neuronserve.serve.frontstack import FrontStack, build_front, front_config
from neuronserve.types import RequestSupport, ServeOptions

pytestmark = pytest.mark.integration

MODEL = "stand-in"
SLOW_S = 0.6
RELEASE = web.AppKey("release", asyncio.Event)


class _Alive:
    def returncode(self) -> int | None:
        return None


@dataclass
class _Replica:
    base_url: str
    index: int = 0
    phase: RPhase = RPhase.READY
    healthy: bool = True
    restarts: int = 0
    outstanding: int = 0
    routed: int = 0
    proc: _Alive = field(default_factory=_Alive)


@dataclass
class _Fleet:
    replicas: list[_Replica]


def _completion(rid: str, body: dict[str, Any]) -> dict[str, Any]:
    text = " Paris is the capital"
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": "length",
                "stop_reason": None,
                "token_ids": [11, 12, 13, 14] if body.get("return_token_ids") else None,
                "prompt_logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 5, "total_tokens": 9, "completion_tokens": 4},
    }


def _chunk(rid: str, text: str, finish: str | None) -> bytes:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
    event = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": MODEL}
    return b"data: " + json.dumps(event | {"choices": [choice]}).encode() + b"\n\n"


async def _engine_completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    rid = request.headers.get("x-request-id", "")
    prompt = body.get("prompt")
    if prompt == "slow":
        await asyncio.sleep(SLOW_S)
    if prompt == "hold":  # until the test lets go
        await asyncio.wait_for(request.app[RELEASE].wait(), 10)
    if prompt == "refuse":
        error = {"message": "the prompt is refused", "type": "BadRequestError", "param": None, "code": 400}
        return web.json_response({"error": error}, status=400)
    if body.get("stream") or prompt == "sse anyway":  # a stream, asked for or not
        resp = web.StreamResponse(headers={"content-type": "text/event-stream; charset=utf-8"})
        await resp.prepare(request)
        for i, word in enumerate((" Paris", " is", " here")):
            await resp.write(_chunk(rid, word, "length" if i == 2 else None))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 5, "total_tokens": 8, "completion_tokens": 3}
            event = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": MODEL}
            await resp.write(
                b"data: " + json.dumps(event | {"choices": [], "usage": usage}).encode() + b"\n\n"
            )
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
    return web.json_response(_completion(rid, body))


@dataclass
class Fronts:
    fast: int  # port of the front with the fast path
    usual: int  # port of the front without it
    path: FastPath
    states: list[ServerState]
    limiters: list[Limiter]
    metrics: list[FrontMetrics]
    servers: list[uvicorn.Server]
    release: asyncio.Event  # lets the engine answer the requests whose prompt is "hold"


@contextlib.asynccontextmanager
async def fronts(max_concurrency: int = 64, worker: int | None = 1) -> AsyncIterator[Fronts]:
    engine = web.Application()
    release = engine[RELEASE] = asyncio.Event()
    engine.router.add_post("/v1/completions", _engine_completions)
    runner = web.AppRunner(engine)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    engine_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    servers: list[tuple[uvicorn.Server, asyncio.Task[None]]] = []
    ports: list[int] = []
    states, limiters, metrics_all, stacks = [], [], [], []
    try:
        for fast in (True, False):
            state = ServerState()
            state.move(Phase.LOADING)
            state.set_engine_health(True)
            state.model_name = MODEL
            state.move(Phase.READY)
            limiter = Limiter(max_concurrency)
            metrics = FrontMetrics(state, lambda lim=limiter: lim.in_flight, {})  # type: ignore[misc]
            environ = {"NEURONSERVE_PROBE_THREAD": "false", "NEURONSERVE_FAST_PATH": str(fast).lower()}
            opts = ServeOptions(max_concurrency=max_concurrency)
            stack: FrontStack = build_front(
                front_config(opts, RequestSupport(), environ),
                state,
                fleet=_Fleet([_Replica(engine_url)]),
                limiter=limiter,
                metrics=metrics,
                store=None,
                worker=worker,
            )
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            server = uvicorn.Server(stack.config)
            servers.append((server, asyncio.create_task(server.serve(sockets=[sock]))))
            ports.append(sock.getsockname()[1])
            states.append(state)
            limiters.append(limiter)
            metrics_all.append(metrics)
            stacks.append(stack)
        for server, _ in servers:
            while not server.started:
                await asyncio.sleep(0.01)
        fast_path = stacks[0].config.http.FAST  # type: ignore[union-attr]
        assert isinstance(fast_path, FastPath) and stacks[1].config.http.FAST is None  # type: ignore[union-attr]
        yield Fronts(
            ports[0], ports[1], fast_path, states, limiters, metrics_all, [s for s, _ in servers], release
        )
    finally:
        for server, task in servers:
            server.should_exit = True
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 10)
        await runner.cleanup()


async def read_answer(reader: asyncio.StreamReader) -> bytes:
    """One HTTP/1.1 answer's bytes: its head, then its counted or chunked body."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").lower().split("\r\n")
    length = next((int(x.split(":", 1)[1]) for x in lines if x.startswith("content-length:")), None)
    if length is not None:
        return head + await reader.readexactly(length)
    if "transfer-encoding: chunked" not in lines:
        return head
    body = b""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.strip(), 16)
        body += size_line + await reader.readexactly(size + 2)
        if size == 0:
            return head + body


async def ask(port: int, *pieces: bytes, answers: int = 1, pause_s: float = 0.05) -> list[bytes]:
    """Send `pieces` (a pause between them), read `answers` answers; then whether the server closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for i, piece in enumerate(pieces):
            if i:
                await asyncio.sleep(pause_s)
            writer.write(piece)
            await writer.drain()
        out = [await asyncio.wait_for(read_answer(reader), 10) for _ in range(answers)]
        with contextlib.suppress(asyncio.TimeoutError):
            rest = await asyncio.wait_for(reader.read(1), 0.2)
            out.append(b"<closed>" if rest == b"" else b"<more>" + rest)
        return out
    finally:
        writer.close()


def _same(a: list[bytes], b: list[bytes]) -> list[bytes]:
    def clean(x: bytes) -> bytes:  # the date, and an id the front made up (random)
        x = re.sub(rb"x-request-id: [0-9a-f]{32}\r\n", b"x-request-id: -\r\n", x)
        return re.sub(rb"date: [^\r]*\r\n", b"date: -\r\n", x)

    assert [clean(x) for x in a] == [clean(x) for x in b]
    return a


def request(
    body: Any,
    *,
    path: str = "/invocations",
    rid: str | None = "client-id-1",
    extra: bytes = b"",
    content_type: bytes = b"application/json",
    version: bytes = b"HTTP/1.1",
) -> bytes:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = b"POST %s %s\r\nhost: front\r\ncontent-type: %s\r\ncontent-length: %d\r\n" % (
        path.encode(),
        version,
        content_type,
        len(raw),
    )
    if rid is not None:
        head += b"x-request-id: %s\r\n" % rid.encode()
    return head + extra + b"\r\n" + raw


TGI = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 4}}
OPENAI = {"prompt": "The capital of France is", "max_tokens": 4}


def both(
    fr: Fronts, *pieces: bytes, answers: int = 1, taken: int = 1, pause_s: float = 0.05
) -> Awaitable[list[bytes]]:
    async def go() -> list[bytes]:
        before = fr.path.taken
        fast = await ask(fr.fast, *pieces, answers=answers, pause_s=pause_s)
        usual = await ask(fr.usual, *pieces, answers=answers, pause_s=pause_s)
        assert fr.path.taken - before == taken, (fr.path.taken - before, fast)
        return _same(fast, usual)

    return go()


def run(scenario: Callable[[Fronts], Awaitable[None]], **kw: Any) -> None:
    async def go() -> None:
        async with fronts(**kw) as fr:
            await scenario(fr)

    asyncio.run(go())


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("tgi body", request(TGI)),
        ("tgi body, /generate", request(TGI, path="/generate")),
        ("tgi body, /", request(TGI, path="/")),
        ("openai body", request(OPENAI)),
        ("a query string", request(TGI, path="/invocations?x=1")),
        ("not json", request(b"{not json")),
        ("not an object", request(b"[1, 2]")),
        ("invalid parameter", request({"inputs": "x", "parameters": {"max_new_tokens": -1}})),
        ("unknown schema", request({"what": 1})),
        ("wrong content type", request(TGI, content_type=b"text/plain")),
        ("the engine refuses", request({"inputs": "refuse"})),
        ("the engine refuses, openai", request({"prompt": "refuse"})),
        ("an empty body", request(b"")),
        ("a bad request id", request(TGI, rid="bad id with spaces")),
    ],
)
def test_an_answer_is_the_usual_paths_byte_for_byte(name: str, raw: bytes) -> None:
    async def scenario(fr: Fronts) -> None:
        (answer, *_) = await both(fr, raw)
        assert answer.startswith(b"HTTP/1.1 "), name
        assert b"x-neuronserve-worker: 1\r\n" in answer

    run(scenario)


def test_a_generated_request_id_has_the_same_place_and_form() -> None:
    async def scenario(fr: Fronts) -> None:
        before = fr.path.taken
        fast = (await ask(fr.fast, request(TGI, rid=None)))[0]
        usual = (await ask(fr.usual, request(TGI, rid=None)))[0]
        assert fr.path.taken == before + 1
        ids = [re.search(rb"x-request-id: ([^\r]+)\r\n", x) for x in (fast, usual)]
        assert all(m is not None and len(m.group(1)) >= 16 for m in ids)
        _same([fast.replace(ids[0].group(1), b"ID")], [usual.replace(ids[1].group(1), b"ID")])  # type: ignore[union-attr]

    run(scenario)


def test_keep_alive_close_and_http_1_0() -> None:
    async def scenario(fr: Fronts) -> None:
        closed = await both(fr, request(TGI, extra=b"connection: close\r\n"))
        assert b"connection: close\r\n" in closed[0] and closed[-1] == b"<closed>"
        kept = await both(fr, request(TGI))
        assert b"connection: close" not in kept[0] and kept[-1] != b"<closed>"
        old = await both(fr, request(TGI, version=b"HTTP/1.0"), taken=0)  # uvicorn's cycle
        assert old[0].startswith(b"HTTP/1.1 200")

    run(scenario)


def test_pipelined_requests_are_answered_in_order() -> None:
    async def scenario(fr: Fronts) -> None:
        three = request({"inputs": "slow"}, rid="a") + request(TGI, rid="b") + request(OPENAI, rid="c")
        answers = await both(fr, three, answers=3, taken=1)  # the first; the others queued in uvicorn's cycle
        assert [re.search(rb"x-request-id: (\w)\r\n", a).group(1) for a in answers[:3]] == [b"a", b"b", b"c"]  # type: ignore[union-attr]

    run(scenario)


def test_a_body_that_is_not_whole_with_its_head_takes_the_usual_path() -> None:
    async def scenario(fr: Fronts) -> None:
        raw = request(TGI)
        cut = raw.index(b"\r\n\r\n") + 10
        answers = await both(fr, raw[:cut], raw[cut:], taken=0)
        assert answers[0].startswith(b"HTTP/1.1 200")
        head_only = raw.index(b"\r\n\r\n") + 4
        answers = await both(fr, raw[:head_only], raw[head_only:], taken=0)
        assert answers[0].startswith(b"HTTP/1.1 200")

    run(scenario)


def test_streams_and_refusals_stay_the_gates() -> None:
    async def scenario(fr: Fronts) -> None:
        stream = await both(fr, request(TGI | {"stream": True}), taken=0)
        assert b"transfer-encoding: chunked" in stream[0] and b"data:" in stream[0]
        chunked = b"POST /invocations HTTP/1.1\r\nhost: f\r\ncontent-type: application/json\r\n"
        chunked += b"transfer-encoding: chunked\r\n\r\n"
        raw = json.dumps(TGI).encode()
        chunked += b"%x\r\n%s\r\n0\r\n\r\n" % (len(raw), raw)
        assert (await both(fr, chunked, taken=0))[0].startswith(b"HTTP/1.1 200")
        too_big = b"POST /invocations HTTP/1.1\r\nhost: f\r\ncontent-type: application/json\r\n"
        too_big += b"content-length: 999999999\r\n\r\n{"
        assert (await both(fr, too_big, taken=0))[0].startswith(b"HTTP/1.1 413")
        expect = request(TGI, extra=b"expect: 100-continue\r\n")
        continued = await both(fr, expect, answers=2, taken=0)
        assert continued[0] == b"HTTP/1.1 100 Continue\r\n\r\n" and continued[1].startswith(b"HTTP/1.1 200")
        for state in fr.states:
            state.move(Phase.DRAINING)
        drained = await both(fr, request(TGI), taken=0)
        assert drained[0].startswith(b"HTTP/1.1 503")

    run(scenario)


def test_a_stream_the_body_did_not_announce_is_written_chunked() -> None:
    async def scenario(fr: Fronts) -> None:
        answer = await both(fr, request({"prompt": "sse anyway", "max_tokens": 3}))
        assert b"transfer-encoding: chunked\r\n" in answer[0] and answer[0].endswith(b"0\r\n\r\n")
        assert answer[-1] != b"<closed>"  # and the connection goes on

    run(scenario)


def test_the_limit_holds_and_its_429s_are_the_gates_and_the_dialects() -> None:
    async def scenario(fr: Fronts) -> None:
        async def hold(n: int) -> list[asyncio.Task[list[bytes]]]:
            tasks = [asyncio.create_task(ask(p, request({"inputs": "hold"}))) for p in (fr.fast, fr.usual)]
            while any(limiter.in_flight < n for limiter in fr.limiters):
                await asyncio.sleep(0.01)
            return tasks

        held = await hold(1)  # one slot of two taken: two sequences do not fit (request_cost.Charge)
        listed = {"inputs": ["a", "b"], "parameters": {"max_new_tokens": 2}}
        over = await both(fr, request(listed))
        assert over[0].startswith(b"HTTP/1.1 429") and b"retry-after: 1\r\n" in over[0], over[0]
        held += await hold(2)  # both slots taken: the gate's own 429
        refused = await both(fr, request(TGI), taken=0)
        assert refused[0].startswith(b"HTTP/1.1 429") and b"retry-after: 1\r\n" in refused[0]
        fr.release.set()
        first = [await t for t in held]
        _same(first[0], first[1])
        _same(first[2], first[3])
        assert all(limiter.in_flight == 0 for limiter in fr.limiters)

    run(scenario, max_concurrency=2)


def test_metrics_and_access_lines_match(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(fr: Fronts) -> None:
        for raw in (request(TGI), request(b"{not json"), request(OPENAI), request({"inputs": "refuse"})):
            await both(fr, raw)

    caplog.set_level("INFO", logger="neuronserve.access")
    run(scenario)
    lines = [
        re.sub(r"latency_ms=\S+", "", r.getMessage())
        for r in caplog.records
        if r.name == "neuronserve.access"
    ]
    assert len(lines) == 8 and lines[0::2] == lines[1::2], lines


def test_metrics_count_the_same() -> None:
    async def scenario(fr: Fronts) -> None:
        for raw in (request(TGI), request(b"{not json"), request(OPENAI), request({"inputs": "refuse"})):
            await both(fr, raw)
        texts = [m.render().decode() for m in fr.metrics]
        counted = [
            sorted(x for x in t.splitlines() if x.startswith("neuronserve_requests_total")) for t in texts
        ]
        assert counted[0] == counted[1] and len(counted[0]) >= 3, counted
        assert all(limiter.in_flight == 0 for limiter in fr.limiters)

    run(scenario)


def test_a_shutdown_lets_the_request_in_flight_finish() -> None:
    async def scenario(fr: Fronts) -> None:
        before = fr.path.taken
        answer = asyncio.create_task(ask(fr.fast, request({"inputs": "slow"})))
        while fr.limiters[0].in_flight == 0:
            await asyncio.sleep(0.01)
        assert fr.path.taken == before + 1
        for conn in list(fr.servers[0].server_state.connections):
            conn.shutdown()
        out = await answer
        assert out[0].startswith(b"HTTP/1.1 200") and b"connection: close\r\n" in out[0]
        assert out[-1] == b"<closed>"

    run(scenario)
