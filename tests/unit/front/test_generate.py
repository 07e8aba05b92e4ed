"""The generate flow (front/generate.py) over a real aiohttp stand-in engine on 127.0.0.1: one engine call
per prompt answered in order, the usage summed, the per-request limit before the engine, engine refusals
and broken streams in the route's dialect, and token texts fetched once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web
from starlette.responses import Response
from tests.support.aiohttp_engine import Handler, engine

from neuronserve.front import proxy
from neuronserve.front.dialect import LMI, TGI, Framing
from neuronserve.front.generate import Generator
from neuronserve.types import RequestSupport

ALL = RequestSupport(logprobs=True, prompt_logprobs=True, penalties=True, structured_outputs=True)


async def _body(resp: Response) -> bytes:
    if hasattr(resp, "body_iterator"):
        return b"".join([bytes(c) async for c in resp.body_iterator])
    return bytes(resp.body)


def serve(
    handler: Handler,
    body: dict[str, Any],
    framing: Framing,
    *,
    max_sequences: int = 32,
    support: RequestSupport = ALL,
) -> tuple[int, Any, list[dict[str, Any]], list[int]]:
    """(status, answer, usages recorded, charges) of one request through a fresh Generator."""
    usages: list[dict[str, Any]] = []
    charges: list[int] = []

    async def run() -> tuple[int, bytes]:
        async with engine(handler) as url:
            client = proxy.make_client(url, 5.0, 8)
            gen = Generator(client, lambda: "m", max_sequences, support)
            try:
                resp = await gen.serve(body, framing, "rid", usages.append, charges.append)
                return resp.status_code, await _body(resp)
            finally:
                await client.aclose()

    status, raw = asyncio.run(run())
    text = raw.decode()
    answer: Any = json.loads(text) if text.startswith(("{", "[")) else text
    return status, answer, usages, charges


def completion(text: str, prompt_tokens: int = 2) -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "text": text, "finish_reason": "length", "token_ids": [7]}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1},
    }


def test_a_list_of_prompts_is_one_engine_call_each_answered_in_order() -> None:
    seen: list[dict[str, Any]] = []

    async def echo(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        await asyncio.sleep(0.05 if body["prompt"] == "first" else 0)  # the first answers last
        return web.json_response(completion(body["prompt"].upper(), len(body["prompt"])))

    status, answer, usages, charges = serve(
        echo, {"inputs": ["first", "second"], "parameters": {"max_new_tokens": 3}}, Framing(TGI, listed=True)
    )
    assert status == 200
    assert answer == [{"generated_text": "FIRST"}, {"generated_text": "SECOND"}]
    assert sorted(b["prompt"] for b in seen) == ["first", "second"]
    assert all(b["max_tokens"] == 3 and b["model"] == "m" for b in seen)
    assert usages == [{"prompt_tokens": 11, "completion_tokens": 2}]
    assert charges == [2]  # two sequences weigh two slots in the gate


def test_too_many_prompts_are_refused_before_the_engine_naming_the_variable() -> None:
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response(completion("x"))

    status, answer, _, charges = serve(
        record, {"inputs": ["a", "b", "c"]}, Framing(TGI, listed=True), max_sequences=2
    )
    assert status == 422 and answer["error_type"] == "validation"
    assert "NEURONSERVE_MAX_SEQUENCES_PER_REQUEST" in answer["error"]
    assert seen == [] and charges == []


def test_an_engine_refusal_of_a_stream_is_the_dialects_error_with_the_engines_message() -> None:
    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "prompt too long", "code": 400}}, status=400)

    status, answer, _, _ = serve(refuse, {"inputs": "hi", "stream": True}, Framing(LMI, listed=False))
    assert status == 400
    assert "prompt too long" in json.dumps(answer)


def test_a_stream_is_reframed_as_the_dialects_events() -> None:
    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for text, reason in (("Hel", None), ("lo", "length")):
            chunk = {"choices": [{"index": 0, "text": text, "finish_reason": reason, "token_ids": [1]}]}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        usage = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}
        await resp.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        return resp

    status, text, usages, _ = serve(stream, {"inputs": "hi", "stream": True}, Framing(TGI, listed=False))
    assert status == 200
    events = [json.loads(line.removeprefix("data:")) for line in text.split("\n\n") if line]
    assert [e["token"]["text"] for e in events] == ["Hel", "lo"]
    assert events[-1]["generated_text"] == "Hello" and events[0]["generated_text"] is None
    assert usages == [{"prompt_tokens": 1, "completion_tokens": 2}]


def test_top_token_texts_are_fetched_once_and_cached() -> None:
    detok: list[list[int]] = []

    async def engine_with_ids(request: web.Request) -> web.Response:
        body = await request.json()
        if request.path == "/detokenize":
            detok.append(body["tokens"])
            return web.json_response({"prompt": f"<{body['tokens'][0]}>"})
        assert body["return_tokens_as_token_ids"] is True
        choice = {
            "index": 0,
            "text": "<5>",
            "finish_reason": "length",
            "token_ids": [5],
            "logprobs": {
                "tokens": ["token_id:5"],
                "token_logprobs": [-0.1],
                "top_logprobs": [{"token_id:5": -0.1, "token_id:6": -2.0}],
                "text_offset": [0],
            },
        }
        return web.json_response({"choices": [choice], "usage": {}})

    async def run() -> list[Any]:
        async with engine(engine_with_ids) as url:
            client = proxy.make_client(url, 5.0, 8)
            gen = Generator(client, lambda: None, 32, ALL)
            body = {"inputs": "x", "parameters": {"top_n_tokens": 2, "details": True}}
            try:
                out = []
                for _ in range(2):
                    resp = await gen.serve(body, Framing(TGI, listed=False), "r", lambda _: None)
                    out.append(json.loads(await _body(resp)))
                return out
            finally:
                await client.aclose()

    first, second = asyncio.run(run())
    assert first == second
    top = first["details"]["top_tokens"][0]
    assert [(t["id"], t["text"]) for t in top] == [(5, "<5>"), (6, "<6>")]
    assert sorted(detok) == [[5], [6]]  # the second request found both texts cached
