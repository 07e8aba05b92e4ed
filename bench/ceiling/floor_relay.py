"""The floor of a Python HTTP relay on this machine: what any front written like ours must pay at least.

Not a front: no routing, no translation, no guard, no log, no metric, no error handling. It accepts
HTTP/1.1 keep-alive connections on uvloop, finds each request's end with httptools, writes the
request's bytes unchanged to an idle keep-alive connection to the engine, writes each read of the
answer unchanged to the client, and finds the answer's end the same way (to reuse the connection).
Every proxied request pays exactly this (two connections' reads and writes, two parses, the loop's
callbacks); everything the real front does is on top. One request at a time per client connection,
as wrk sends them: pipelined requests are not split (a benchmark's relay, not a server).
bench/bench_floor.py measures its CPU per request against the engine's in one run.

    python bench/ceiling/floor_relay.py LISTEN_PORT ENGINE_PORT [raw|asgi|gate|gen|one] [MODEL]

`asgi`: the next layer up, what the front stands on: uvicorn configured as the front configures it
(serve/listener.py: httptools on uvloop, the front's connection guards and corked writes from
serve/connections.py), and an ASGI app of a dozen lines that
reads the body, sends it through the front's own engine client (front/enginepool.py) and answers
with the engine's status, type and bytes (each read of a stream as one body message). Still no
gate, route table, translation, limiter, metric or log: the difference between this and the front
is what those cost.

`gate`: the asgi relay inside the front's real Gate (front/gate.py: request id, route allowlist, phase
checks, the body read before the slot with its deadline, the limiter and sequence charge, the
disconnect watcher, the request metrics and the access line, written as the serve writes it by
logsetup to stdout). The front's handlers, route table, translation and answer building are what
is left between this and the front.

`gen`: the gate with the front's own generate flow behind it and nothing between them: a TGI body to
`/invocations` is parsed and classified (front/schema.py) and served by the front's `Generator`
(front/generate.py: validation, translation, the sequence count, the engine call through the front's
engine client, the answer read and shaped in the TGI dialect), its answer sent as the front sends
it. What is left between this and the front is the dispatch: the replica scope, `HotRoutes`,
Starlette's request, the guarded handler and its header reads.

`one`: a non-streamed TGI body served by one coroutine that takes every step the gate and the generate
flow take for it, with the front's own functions, and no layer between them (one_piece_app).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import deque
from typing import Any

import httptools
import uvicorn
import uvloop

from neuronserve import logsetup
from neuronserve.front import completion_reader, genparams, request_cost, routes, schema
from neuronserve.front.dialect import TGI_INVOCATIONS, Framing
from neuronserve.front.enginepool import EnginePool
from neuronserve.front.gate import BODY_TIMEOUT_S, SCHEMA_KEY, TOKENS_KEY, Gate, request_id
from neuronserve.front.generate import Generator
from neuronserve.front.jsonbits import COMPACT
from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.proxy import EngineClient
from neuronserve.front.requestid import engine_id
from neuronserve.front.state import Phase, ServerState
from neuronserve.front.streamusage import counts
from neuronserve.front.support import check_generate
from neuronserve.serve import listener
from neuronserve.serve.connections import ConnectionLimits
from neuronserve.types import RequestSupport, ServeOptions


class Upstream(asyncio.Protocol):
    """One keep-alive connection to the engine; one request in flight at a time."""

    def __init__(self, pool: deque[Upstream]) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.client: Downstream | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, client: Downstream, raw: bytes) -> None:
        self.client = client
        assert self.transport is not None
        self.transport.write(raw)

    def data_received(self, data: bytes) -> None:
        if self.client is not None:
            self.client.answer(data)  # each read written through, as a stream needs
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        self.client = None
        self.pool.append(self)


class Downstream(asyncio.Protocol):
    """One client connection."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.buf: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf.append(data)
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        raw, self.buf = b"".join(self.buf), []
        self.relay.forward(self, raw)

    def answer(self, raw: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(raw)


class Relay:
    def __init__(self, engine_port: int) -> None:
        self.engine_port = engine_port
        self.pool: deque[Upstream] = deque()

    def forward(self, client: Downstream, raw: bytes) -> None:
        if self.pool:
            self.pool.pop().send(client, raw)
        else:
            asyncio.get_running_loop().create_task(self._fresh(client, raw))

    async def _fresh(self, client: Downstream, raw: bytes) -> None:
        loop = asyncio.get_running_loop()
        _, up = await loop.create_connection(lambda: Upstream(self.pool), "127.0.0.1", self.engine_port)
        up.send(client, raw)


async def main(listen_port: int, engine_port: int) -> None:
    relay = Relay(engine_port)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Downstream(relay), "127.0.0.1", listen_port, backlog=1024)
    print(f"floor relay on {listen_port} -> {engine_port}", flush=True)
    await server.serve_forever()


def asgi_app(engine_port: int) -> Any:
    pool = EnginePool(256, wait_s=60.0, connect_s=5.0, read_s=60.0)
    base = f"http://127.0.0.1:{engine_port}"
    json_type = {"content-type": "application/json"}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = (await receive())["body"]
        answer = await pool.request(base, scope["method"], scope["path"], json_type, body)
        headers = [(b"content-type", answer.headers.get("content-type", "application/json").encode())]
        stream = answer.headers.get("transfer-encoding") == "chunked"
        if not stream:
            data = await answer.read()
            answer.release()
            headers.append((b"content-length", str(len(data)).encode()))
            await send({"type": "http.response.start", "status": answer.status, "headers": headers})
            await send({"type": "http.response.body", "body": data})
            return
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        while chunk := await answer.chunk():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        answer.release()
        await send({"type": "http.response.body", "body": b""})

    return app


def gen_app(engine_port: int, model: str) -> Any:
    gen = Generator(EngineClient(f"http://127.0.0.1:{engine_port}", 60.0, 256), lambda: model)
    framing = Framing(TGI_INVOCATIONS, listed=True)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = (await receive())["body"]
        body = schema.parse_body(raw)
        kind, _ = schema.classify(body)
        assert kind == "tgi", kind

        def record(usage: dict[str, Any]) -> None:
            if usage:
                scope[TOKENS_KEY] = counts(usage)

        def charge(sequences: int) -> None:
            request_cost.charge(scope, sequences)

        response = await gen.serve(body, framing, request_id(scope), record, charge)
        await response(scope, receive, send)

    return app


# What the one-piece relay leaves out, to measure what a step costs (comma-separated: watcher, metrics,
# log); not set by bench_floor.py.
SKIP = frozenset(os.environ.get("FLOOR_ONE_SKIP", "").split(","))


def one_piece_app(engine_port: int, model: str) -> Any:  # noqa: PLR0915 (one piece, on purpose)
    """A non-streamed TGI body to `/invocations` served in one coroutine: what the estimate in
    docs/PERFORMANCE.md ("How far the front is from the floor") calls a request path written as one
    piece, measured instead of estimated.

    Every step the gate and the generate flow take for such a request, with the front's own functions
    and objects, in the front's order, but with no ASGI layer between them and no Starlette request or
    response: the request id, the allowlist and phase checks, the body read under its deadline timer,
    the limiter's slot, a disconnect watcher task that cancels the request, the body's parse and
    classification, validation and translation (genparams, support), the sequence limit, the engine
    call through the front's engine pool with the engine's own request id, the answer's parse, the
    sequences and the TGI answer (completion_reader, the dialect) encoded as the front encodes it, the
    token counts, the request metrics and the access line. Its answer is byte for byte the front's
    (tests/integration/test_bench_floor.py). Not a front: no other route, body or error path."""
    # The gate relay's READY state, limiter, metrics and access log; its _measure and _log are called
    # here, it is never called as an app.
    helper = gated(lambda *_: None)
    state, limiter = helper.state, helper.limiter
    pool = EnginePool(256, wait_s=60.0, connect_s=5.0, read_s=60.0)
    base = f"http://127.0.0.1:{engine_port}"
    support = RequestSupport()
    framing = Framing(TGI_INVOCATIONS, listed=True)
    texts: dict[int, str] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:  # noqa: PLR0915
        start = time.perf_counter()
        rid = request_id(scope)
        path = scope["path"]
        assert routes.is_allowed(path, True) and state.phase == Phase.READY
        task = asyncio.current_task()
        assert task is not None
        deadline = task.get_loop().call_later(BODY_TIMEOUT_S, task.cancel)
        try:
            parts = []
            more = True
            while more:
                message = await receive()
                parts.append(message.get("body", b""))
                more = message.get("more_body", False)
        finally:
            deadline.cancel()
        raw = b"".join(parts)
        assert state.phase == Phase.READY and limiter.try_acquire(1)
        complete = False

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if not complete:
                task.cancel()

        watcher = task.get_loop().create_task(watch()) if "watcher" not in SKIP else None
        status = 500
        first_byte = None
        try:
            body = schema.parse_body(raw)
            kind, _ = schema.classify(body)
            assert kind == "tgi", kind
            scope[SCHEMA_KEY] = kind
            prompt = genparams.check_inputs(body)
            assert isinstance(prompt, str)
            req = genparams.translate(body, prompt, model, support.lora_adapters)
            check_generate(body.get("parameters") or {}, support)
            if not support.logprobs:
                req.engine.pop("logprobs", None)
            assert not request_cost.over_limit(req.n, 32, "inputs x best_of/n") and not req.stream
            headers = {"content-type": "application/json", "x-request-id": engine_id(rid)}
            answer = await pool.request(
                base, "POST", "/v1/completions", headers, json.dumps(req.engine).encode()
            )
            data = await answer.read()
            answer.release()
            assert answer.status == 200, data[:200]
            out = schema.loads(data)
            seqs = completion_reader.sequences(req, out, texts)
            if out.get("usage"):
                scope[TOKENS_KEY] = counts(out["usage"])
            content = COMPACT([framing.dialect.response(req, seqs)]).encode("utf-8")
            head = [
                (b"content-length", str(len(content)).encode()),
                (b"content-type", b"application/json"),
                (b"x-request-id", rid.encode("latin-1")),
            ]
            status = 200
            await send({"type": "http.response.start", "status": 200, "headers": head})
            first_byte = time.perf_counter()
            complete = True
            await send({"type": "http.response.body", "body": content})
        finally:
            if watcher is not None:
                watcher.cancel()
            limiter.release(1)
            if "metrics" not in SKIP:
                helper._measure(scope, path, status, start, first_byte)
            if "log" not in SKIP:
                helper._log(scope, status, start)

    return app


def gated(app: Any) -> Gate:
    state = ServerState()
    state.move(Phase.LOADING)
    state.move(Phase.READY)
    gate: Gate | None = None
    metrics = FrontMetrics(state, lambda: gate.in_flight if gate else 0, {})
    gate = Gate(app, state, 256, metrics=metrics, expose_engine_routes=True)
    logsetup.setup("text")
    return gate


def serve_asgi(listen_port: int, engine_port: int, mode: str, model: str = "") -> None:
    if mode == "one":
        served = one_piece_app(engine_port, model)
    else:
        app = gen_app(engine_port, model) if mode == "gen" else asgi_app(engine_port)
        served = gated(app) if mode in ("gate", "gen") else app
    opts = ServeOptions(host="127.0.0.1", port=listen_port)
    config = listener.uvicorn_config(served, opts, ConnectionLimits())  # the front's own
    print(f"floor relay ({mode}) on {listen_port} -> {engine_port}", flush=True)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    if sys.argv[3:4] in (["asgi"], ["gate"], ["gen"], ["one"]):
        serve_asgi(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], *sys.argv[4:5])
    else:
        uvloop.install()
        asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
