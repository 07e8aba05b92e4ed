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
import signal
import sys
import time
from collections import deque
from email.utils import formatdate
from typing import Any

import httptools
import uvicorn
import uvloop

from neuronserve import logsetup
from neuronserve.front import completion_reader, genparams, request_cost, routes, schema
from neuronserve.front.dialect import TGI_INVOCATIONS, Framing
from neuronserve.front.disconnect import DEPARTURE_KEY
from neuronserve.front.enginepool import EnginePool
from neuronserve.front.gate import BODY_TIMEOUT_S, Gate, request_id
from neuronserve.front.generate import Generator
from neuronserve.front.jsonbits import COMPACT
from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.proxy import EngineClient
from neuronserve.front.requestid import engine_id
from neuronserve.front.requestrecord import SCHEMA_KEY, TOKENS_KEY
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


class OnePiece:
    """The steps the gate and the generate flow take for a non-streamed TGI body to `/invocations`, with
    the front's own functions and objects, in the front's order; shared by the `one` relay (on uvicorn)
    and the `oneraw` relay (below uvicorn). Not a front: no other route, body or error path."""

    def __init__(self, engine_port: int, model: str) -> None:
        # The gate relay's READY state, limiter, metrics and access log; its _measure and _log are
        # called here, it is never called as an app.
        self.helper = gated(lambda *_: None)
        self.state, self.limiter = self.helper.state, self.helper.limiter
        self.pool = EnginePool(256, wait_s=60.0, connect_s=5.0, read_s=60.0)
        self.base = f"http://127.0.0.1:{engine_port}"
        self.model = model
        self.support = RequestSupport()
        self.framing = Framing(TGI_INVOCATIONS, listed=True)
        self.texts: dict[int, str] = {}

    def admit(self, scope: dict[str, Any]) -> None:
        """The id decided, the allowlist and the phase checked (before the body is read)."""
        request_id(scope)
        assert routes.is_allowed(scope["path"], True) and self.state.phase == Phase.READY

    def take_slot(self) -> None:
        assert self.state.phase == Phase.READY and self.limiter.try_acquire(1)

    async def answer(self, scope: dict[str, Any], raw: bytes) -> bytes:
        """The TGI answer's bytes for the request body `raw` (the engine called once)."""
        support, rid = self.support, request_id(scope)
        body = schema.parse_body(raw)
        kind, _ = schema.classify(body)
        assert kind == "tgi", kind
        scope[SCHEMA_KEY] = kind
        prompt = genparams.check_inputs(body)
        assert isinstance(prompt, str)
        req = genparams.translate(body, prompt, self.model, support.lora_adapters)
        check_generate(body.get("parameters") or {}, support)
        if not support.logprobs:
            req.engine.pop("logprobs", None)
        assert not request_cost.over_limit(req.n, 32, "inputs x best_of/n") and not req.stream
        headers = {"content-type": "application/json", "x-request-id": engine_id(rid)}
        answer = await self.pool.request(
            self.base, "POST", "/v1/completions", headers, json.dumps(req.engine).encode()
        )
        data = await answer.read()
        answer.release()
        assert answer.status == 200, data[:200]
        out = schema.loads(data)
        seqs = completion_reader.sequences(req, out, self.texts)
        if out.get("usage"):
            scope[TOKENS_KEY] = counts(out["usage"])
        return COMPACT([self.framing.dialect.response(req, seqs)]).encode("utf-8")

    def finish(self, scope: dict[str, Any], status: int, start: float, first_byte: float | None) -> None:
        """The slot given back, the request measured and logged (each step skippable: SKIP)."""
        self.limiter.release(1)
        if "metrics" not in SKIP:
            self.helper.record.measure(scope, scope["path"], status, start, first_byte)
        if "log" not in SKIP:
            self.helper.record.log(scope, status, start)


def one_piece_app(engine_port: int, model: str) -> Any:  # noqa: PLR0915 (one piece, on purpose)
    """A non-streamed TGI body to `/invocations` served in one coroutine on uvicorn: what the estimate
    in docs/PERFORMANCE.md ("How far the front is from the floor") calls a request path written as one
    piece, measured instead of estimated.

    Every step the gate and the generate flow take for such a request (OnePiece), with no ASGI layer
    between them and no Starlette request or response: the request id, the allowlist and phase checks,
    the body read under its deadline timer, the limiter's slot, the request cancelled when its client
    leaves (told by the front's connection: front/disconnect.py's Departure, as the gate does), the
    body's parse and classification, validation and translation (genparams, support), the sequence
    limit, the engine call through the front's engine pool with the engine's own request id, the
    answer's parse, the sequences and the TGI answer (completion_reader, the dialect) encoded as the
    front encodes it, the token counts, the request metrics and the access line. Its answer is byte
    for byte the front's (tests/integration/test_bench_floor.py)."""
    one = OnePiece(engine_port, model)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        start = time.perf_counter()
        one.admit(scope)
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
        one.take_slot()
        complete = False

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if not complete:
                task.cancel()

        departure = scope.get(DEPARTURE_KEY)  # the front's connections tell of a disconnect themselves

        def leave() -> None:
            if not complete:
                task.cancel()

        watcher = None
        if departure is not None and "watcher" not in SKIP:
            departure.on_gone(leave)
        elif "watcher" not in SKIP:
            watcher = task.get_loop().create_task(watch())
        status = 500
        first_byte = None
        try:
            content = await one.answer(scope, raw)
            head = [
                (b"content-length", str(len(content)).encode()),
                (b"content-type", b"application/json"),
                (b"x-request-id", request_id(scope).encode("latin-1")),
            ]
            status = 200
            await send({"type": "http.response.start", "status": 200, "headers": head})
            first_byte = time.perf_counter()
            complete = True
            await send({"type": "http.response.body", "body": content})
        finally:
            if watcher is not None:
                watcher.cancel()
            if departure is not None:
                departure.forget(leave)
            one.finish(scope, status, start, first_byte)

    return app


class OneRaw(asyncio.Protocol):
    """`oneraw`: the one piece below uvicorn. One client connection on uvloop, parsed with httptools,
    with what the front's connection layer guarantees done here in the cheapest way this relay knows
    (a header deadline and a header size count per request, a body deadline, the keep-alive idle
    timer, pipelined requests queued with reading paused, a disconnect cancelling the request's task
    from `connection_lost` instead of a watcher task), and the answer written in one transport write
    with the headers uvicorn adds (date, server). Not a front: a request that is not a TGI body to
    `/invocations` fails an assertion, and a refusal is a closed connection, not an answer."""

    KEEP_ALIVE_S = 5.0
    HEADER_TIMEOUT_S = 10.0
    MAX_HEADER_BYTES = 64 * 1024
    _date = b""
    _date_at = 0.0

    def __init__(self, one: OnePiece) -> None:
        self.one = one
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.scope: dict[str, Any] = {}
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.parts: list[bytes] = []
        self.head_bytes = 0
        self.in_body = False
        self.timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[None] | None = None
        self.waiting: deque[tuple[dict[str, Any], bytes, bool]] = deque()
        self.answered = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.timer = self.loop.call_later(self.HEADER_TIMEOUT_S, self._expire)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        if self.task is not None and not self.answered:
            self.task.cancel()  # the client left: the request's work is cancelled, as the gate does
        self.transport = None

    def data_received(self, data: bytes) -> None:
        if not self.in_body:  # bytes before a head's end count against the header limit
            self.head_bytes += len(data)
            if self.head_bytes > self.MAX_HEADER_BYTES:
                self._close()
                return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._close()

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers = []
        self.parts = []
        self._stop_timer()
        self.timer = self.loop.call_later(self.HEADER_TIMEOUT_S, self._expire)

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.in_body = True
        self.head_bytes = 0
        path = httptools.parse_url(self.url).path
        self.scope = {
            "type": "http",
            "method": self.parser.get_method().decode("ascii"),
            "path": path.decode("ascii"),
            "raw_path": path,
            "headers": self.headers,
            "start": time.perf_counter(),
        }
        self.one.admit(self.scope)
        self._stop_timer()
        self.timer = self.loop.call_later(BODY_TIMEOUT_S, self._expire)  # the body's deadline

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        self.in_body = False
        self._stop_timer()
        raw = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
        self.parts = []
        keep = self.parser.should_keep_alive()
        if self.task is not None:  # pipelined behind one in flight: queued, reading paused
            self.waiting.append((self.scope, raw, keep))
            if self.transport is not None:
                self.transport.pause_reading()
            return
        self._start(self.scope, raw, keep)

    def _start(self, scope: dict[str, Any], raw: bytes, keep: bool) -> None:
        self.answered = False
        self.task = self.loop.create_task(self._serve(scope, raw, keep))

    async def _serve(self, scope: dict[str, Any], raw: bytes, keep: bool) -> None:
        one = self.one
        start = scope["start"]
        one.take_slot()
        status = 500
        first_byte = None
        try:
            content = await one.answer(scope, raw)
            status = 200
            first_byte = time.perf_counter()
            head = b"HTTP/1.1 200 OK\r\ndate: %s\r\nserver: uvicorn\r\ncontent-length: %d\r\n" % (
                self._now(),
                len(content),
            )
            head += b"content-type: application/json\r\nx-request-id: %s\r\n" % (
                request_id(scope).encode("latin-1")
            )
            if not keep:
                head += b"connection: close\r\n"
            self.answered = True
            if self.transport is not None:
                self.transport.write(head + b"\r\n" + content)
        finally:
            one.finish(scope, status, start, first_byte)
            self.task = None
            self._next(keep)

    def _next(self, keep: bool) -> None:
        transport = self.transport
        if transport is None:
            return
        if not keep:
            transport.close()
        elif self.waiting:
            transport.resume_reading()
            self._start(*self.waiting.popleft())
        else:
            self.timer = self.loop.call_later(self.KEEP_ALIVE_S, self._expire)

    def _now(self) -> bytes:
        """The date header's value, formatted once a second (as uvicorn's server does)."""
        now = time.time()
        if now - OneRaw._date_at >= 1.0:
            OneRaw._date = formatdate(now, usegmt=True).encode()
            OneRaw._date_at = now
        return OneRaw._date

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expire(self) -> None:
        self.timer = None
        if self.task is None:
            self._close()

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def serve_oneraw(listen_port: int, engine_port: int, model: str) -> None:
    uvloop.install()

    async def run() -> None:
        one = OnePiece(engine_port, model)
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: OneRaw(one), "127.0.0.1", listen_port, backlog=2048)
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)  # a clean exit: the batched access lines written
        print(f"floor relay (oneraw) on {listen_port} -> {engine_port}", flush=True)
        await stop.wait()
        server.close()

    asyncio.run(run())


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
    if sys.argv[3:4] == ["oneraw"]:
        serve_oneraw(int(sys.argv[1]), int(sys.argv[2]), *sys.argv[4:5])
    elif sys.argv[3:4] in (["asgi"], ["gate"], ["gen"], ["one"]):
        serve_asgi(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], *sys.argv[4:5])
    else:
        uvloop.install()
        asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
