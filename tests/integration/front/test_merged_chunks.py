"""A stream chunk that carries several tokens (vLLM merges a request's deltas when its output loop
falls behind: front/completion_reader.py, merged_ids) still makes one TGI or LMI event per token,
with its id and text, and the stream's final count is the tokens', not the chunks'.

Driven by text_generation's own AsyncClient against the real front on a real port, over a stand-in
engine that streams one merged chunk and answers /detokenize as vLLM does (one id's text, decoded
alone: SentencePiece drops the leading space, which the front puts back from the chunk's text)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from tests.support.front_app import running_front
from text_generation import AsyncClient

pytestmark = pytest.mark.integration

TEXTS = {11: "Paris", 12: "is", 13: "the", 14: "capital"}  # each id decoded alone


def _chunk(text: str, ids: list[int], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "token_ids": ids}
    return {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": [choice]}


def _stream(body: dict[str, Any]) -> list[Any]:
    events: list[Any] = [
        _chunk(" Paris", [11]),
        _chunk(" is the", [12, 13]),  # two tokens in one chunk
        _chunk(" capital", [14], "length"),
    ]
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
        events.append(
            {"id": "cmpl-1", "object": "text_completion", "created": 1, "choices": [], "usage": usage}
        )
    return [*events, "[DONE]"]


def _detokenize(body: dict[str, Any]) -> dict[str, Any]:
    return {"prompt": TEXTS[body["tokens"][0]]}


def _run(test: Any, **opts: object) -> None:
    async def go() -> None:
        async with running_front(
            answers={"/detokenize": _detokenize}, streams={"/v1/completions": _stream}, listen=True, **opts
        ) as front:
            front.state.model_name, front.state.model_names = "m", ["m"]
            await test(front)

    asyncio.run(go())


def test_the_tgi_client_gets_one_event_per_token_of_a_merged_chunk() -> None:
    async def test(front: Any) -> None:
        client = AsyncClient(front.url, timeout=10)
        got = [r async for r in client.generate_stream("hi", max_new_tokens=4)]
        assert [(r.token.id, r.token.text, r.token.special) for r in got] == [
            (11, " Paris", False),
            (12, " is", False),
            (13, " the", False),
            (14, " capital", False),
        ]
        assert got[-1].generated_text == " Paris is the capital"
        assert [r.generated_text for r in got[:-1]] == [None, None, None]
        assert got[-1].details is not None and got[-1].details.generated_tokens == 4

    _run(test)


def test_the_lmi_stream_counts_the_tokens_of_a_merged_chunk() -> None:
    async def test(front: Any) -> None:
        body = {"inputs": "hi", "parameters": {"max_new_tokens": 4, "details": True}, "stream": True}
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(f"{front.url}/invocations", json=body)
        assert r.status_code == 200, r.text
        lines = [json.loads(line) for line in r.text.splitlines() if line]
        assert [line["token"]["id"] for line in lines] == [11, 12, 13, 14]
        assert "".join(line["token"]["text"] for line in lines) == " Paris is the capital"
        assert lines[-1]["details"]["generated_tokens"] == 4

    _run(test, dialect="lmi", lmi_stream_format="jsonlines")
