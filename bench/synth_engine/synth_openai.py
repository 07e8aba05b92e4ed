"""A synthetic vLLM OpenAI server that answers as fast as it can: the engine of bench/bench_ceiling.py.

Why: a real model makes tens of tokens per second on the development machine, so the front's own cost
per request and per token cannot be seen behind it (docs/PERFORMANCE.md, "Front ceiling"). This server
has no model: it answers each completion with `max_tokens` tokens (16 when absent) in vLLM 0.11's field
shapes (synth_shapes.py), one SSE event per token, yielding to the event loop after each event as a
batching engine emits one token per step for every stream.

Routes, as vLLM 0.11's api_server: POST /v1/completions and /v1/chat/completions (plain and
`stream: true`), POST /invocations (chat when the body has `messages`, a completion when it has
`prompt`, else vLLM's 400, as vllm/entrypoints/openai/api_server.py dispatches by request type),
GET /health, /ping, /v1/models, /version, /metrics, POST /tokenize and /detokenize.

Like vLLM, it prints one uvicorn access line per request unless `--disable-uvicorn-access-log` is
given (the plan's argv does not give it, so the front relays those lines: a cost the front really
pays). `SYNTH_ACCESS_LOG=0|1` overrides. `SYNTH_PROCS=N` serves the port from N processes
(SO_REUSEPORT), so the engine side can outrun a front with several workers on a machine with more cores.
`SYNTH_STEP_S=S` paces generation like a real engine step (each stream gets its next token S seconds
later, a short answer comes after max_tokens steps); 0, the default, is as fast as the loop turns.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from http import HTTPStatus
from typing import Any

import synth_shapes as shapes
from aiohttp import web

JSON = "application/json"
SSE = "text/event-stream; charset=utf-8"
DEFAULT_MAX_TOKENS = 16
VLLM_VERSION = "0.11.0"


class Engine:
    def __init__(self, model: str, max_model_len: int, access_log: bool, step_s: float = 0.0) -> None:
        self.model, self.max_model_len, self.access_log = model, max_model_len, access_log
        self.step_s = step_s
        self.running = self.requests = self.tokens = 0
        self.pid = os.getpid()

    def log(self, request: web.BaseRequest, status: int) -> None:
        if not self.access_log:
            return
        peer = request.transport.get_extra_info("peername") if request.transport else None
        host, port = (peer[0], peer[1]) if peer else ("127.0.0.1", 0)
        sys.stdout.write(
            f'(APIServer pid={self.pid}) INFO:     {host}:{port} - "{request.method} {request.path} '
            f'HTTP/1.1" {status} {HTTPStatus(status).phrase}\n'
        )
        sys.stdout.flush()

    def answer(
        self, request: web.BaseRequest, body: bytes, status: int = 200, ctype: str = JSON
    ) -> web.Response:
        self.log(request, status)
        return web.Response(body=body, status=status, content_type=None, headers={"content-type": ctype})

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        route = (request.method, request.path)
        if route == ("POST", "/v1/completions"):
            return await self.generate(request, "completion")
        if route == ("POST", "/v1/chat/completions"):
            return await self.generate(request, "chat")
        if route == ("POST", "/invocations"):
            return await self.generate(request, None)
        if route in (("GET", "/health"), ("GET", "/ping"), ("POST", "/ping")):
            return self.answer(request, b"", ctype="text/plain")
        if route == ("GET", "/v1/models"):
            return self.answer(request, self.models())
        if route == ("GET", "/version"):
            return self.answer(request, json.dumps({"version": VLLM_VERSION}).encode())
        if route == ("GET", "/metrics"):
            text = shapes.metrics_text(self.model, self.running, self.requests, self.tokens)
            return self.answer(request, text, ctype="text/plain; version=0.0.4; charset=utf-8")
        if route == ("POST", "/tokenize"):
            return await self.tokenize(request)
        if route == ("POST", "/detokenize"):
            return await self.detokenize(request)
        return self.answer(request, json.dumps({"detail": "Not Found"}).encode(), 404)

    def models(self) -> bytes:
        card = {
            "id": self.model,
            "object": "model",
            "created": 0,
            "owned_by": "vllm",
            "root": self.model,
            "parent": None,
            "max_model_len": self.max_model_len,
            "permission": [],
        }
        return json.dumps({"object": "list", "data": [card]}).encode()

    async def body(self, request: web.BaseRequest) -> dict[str, Any] | None:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    async def generate(self, request: web.BaseRequest, kind: str | None) -> web.StreamResponse:
        body = await self.body(request)
        if body is None:
            return self.answer(request, shapes.error(400, "JSON decode error"), 400)
        if kind is None:  # /invocations: the first request type that validates, as vLLM dispatches
            kind = "chat" if "messages" in body else "completion" if "prompt" in body else None
            if kind is None:
                msg = (
                    "Cannot find suitable handler for request. Expected one of: "
                    "['ChatCompletionRequest', 'CompletionRequest']"
                )
                return self.answer(request, shapes.error(400, msg), 400)
        field = "messages" if kind == "chat" else "prompt"
        if field not in body:
            return self.answer(request, shapes.error(400, f"Field required: {field}"), 400)
        n = body.get("max_tokens") or body.get("max_completion_tokens") or DEFAULT_MAX_TOKENS
        if type(n) is not int or n < 1:
            return self.answer(request, shapes.error(400, "max_tokens must be at least 1"), 400)
        prefix = "chatcmpl" if kind == "chat" else "cmpl"
        rid = shapes.request_id(prefix, request.headers.get("x-request-id"))
        model = str(body.get("model") or self.model)
        prompt_n = (
            shapes.chat_prompt_tokens(body[field]) if kind == "chat" else shapes.prompt_tokens(body[field])
        )
        self.requests += 1
        self.tokens += n
        if not body.get("stream"):
            if self.step_s:
                await asyncio.sleep(self.step_s * n)
            if kind == "chat":
                return self.answer(request, shapes.chat(rid, model, n, prompt_n))
            return self.answer(
                request, shapes.completion(rid, model, n, prompt_n, bool(body.get("return_token_ids")))
            )
        opts = body.get("stream_options")
        usage_chunk = isinstance(opts, dict) and bool(opts.get("include_usage"))
        if kind == "chat":
            stream: Any = shapes.ChatStream(rid, model, n, prompt_n, usage_chunk=usage_chunk)
        else:
            token_ids = bool(body.get("return_token_ids"))
            stream = shapes.CompletionStream(
                rid, model, n, prompt_n, token_ids=token_ids, usage_chunk=usage_chunk
            )
        return await self.stream(request, stream, kind == "chat")

    async def stream(self, request: web.BaseRequest, stream: Any, chat: bool) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": SSE})
        await resp.prepare(request)
        self.log(request, 200)
        self.running += 1
        try:
            if chat:
                await resp.write(stream.start())
            for i in range(stream.n):
                await resp.write(stream.event(i))
                await asyncio.sleep(self.step_s)  # one token per step: every other stream gets its turn
            await resp.write(stream.end())
            await resp.write_eof()
        except (ConnectionError, asyncio.CancelledError):  # the client went away: vLLM aborts
            pass
        finally:
            self.running -= 1
        return resp

    async def tokenize(self, request: web.BaseRequest) -> web.Response:
        body = await self.body(request) or {}
        n = shapes.prompt_tokens(body.get("prompt"))
        out = {
            "count": n,
            "max_model_len": self.max_model_len,
            "tokens": list(range(1, n + 1)),
            "token_strs": None,
        }
        return self.answer(request, json.dumps(out).encode())

    async def detokenize(self, request: web.BaseRequest) -> web.Response:
        body = await self.body(request) or {}
        ids = body.get("tokens") or []
        words = shapes.WORDS
        text = "".join(words[(i - shapes.FIRST_ID) % len(words)] for i in ids if type(i) is int)
        return self.answer(request, json.dumps({"prompt": text}).encode())


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="synthetic vllm.entrypoints.openai.api_server")
    parser.add_argument("--model", default="synthetic")
    parser.add_argument("--served-model-name", nargs="+", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--disable-uvicorn-access-log", action="store_true")
    args, _ = parser.parse_known_args(argv)
    return args


async def serve(args: argparse.Namespace, reuse_port: bool) -> None:
    access = os.environ.get("SYNTH_ACCESS_LOG")
    log = (access != "0") if access is not None else not args.disable_uvicorn_access_log
    model = (args.served_model_name or [args.model])[0]
    engine = Engine(model, args.max_model_len, log, float(os.environ.get("SYNTH_STEP_S") or 0))
    server = web.Server(engine.handle, access_log=None)
    runner = web.ServerRunner(server, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, reuse_port=reuse_port or None, backlog=2048)
    await site.start()
    print(f"(APIServer pid={os.getpid()}) INFO: synthetic engine on {args.host}:{args.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main(argv: list[str]) -> None:
    args = parse(argv)
    procs = int(os.environ.get("SYNTH_PROCS", "1") or "1")
    children: list[subprocess.Popen[bytes]] = []
    if procs > 1 and not os.environ.get("SYNTH_CHILD"):
        env = {**os.environ, "SYNTH_CHILD": "1"}
        module = "vllm.entrypoints.openai.api_server"
        children = [
            subprocess.Popen([sys.executable, "-m", module, *argv], env=env) for _ in range(procs - 1)
        ]
    try:
        import uvloop  # noqa: PLC0415 (optional: as vLLM's uvicorn, the faster loop when installed)

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        runner.run(serve(args, procs > 1))
    for child in children:
        with contextlib.suppress(OSError):
            child.terminate()
