"""The real front (tests/support/front_app.py) given the RequestSupport a real Neuron plan produces:
each dialect refuses what the engine cannot serve in its own shape and status (OpenAI 400, TGI 422,
LMI 424), before anything reaches the stand-in engine; the defaults clients send pass; TGI `details`
stays served with `logprob` null; LoRA adapters are selected by `model` and `adapter_id`.

Real clients where they exist: openai's AsyncOpenAI and text_generation's AsyncClient over a real
127.0.0.1 port (the front served by uvicorn), httpx for the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import openai
import pytest
from tests.support.builders import LORA_ENV, asset_plan
from tests.support.front_app import Front, running_front
from text_generation import AsyncClient
from text_generation.errors import ValidationError

from neuronserve.types import RequestSupport

pytestmark = pytest.mark.integration  # the front served by uvicorn on a real port
# What a Neuron plan of vllm-neuron 0.2.2+lts tells the front (plan.request_support), built by the
# real plan: on-device sampling (the default) without and with LoRA adapters a and b.
NEURON = asset_plan({}).request_support
LORA = asset_plan(LORA_ENV).request_support
WHY = NEURON.why
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def _chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


TEXTS = {5: "Paris", 6: "is"}  # as a SentencePiece tokenizer decodes each id alone: no leading space


def _completion(_: dict[str, Any]) -> dict[str, Any]:
    """What vllm-neuron answers with on-device sampling: token ids, no logprobs."""
    choice = {
        "index": 0,
        "text": " Paris is",
        "token_ids": [5, 6],
        "logprobs": None,
        "finish_reason": "length",
    }
    return {"choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}


def _detokenize(body: dict[str, Any]) -> dict[str, Any]:
    return {"prompt": TEXTS[body["tokens"][0]]}


ANSWERS = {
    "/v1/chat/completions": _chat_completion,
    "/v1/completions": _completion,
    "/detokenize": _detokenize,
}


def _run(support: RequestSupport, test: Callable[[Front], Awaitable[None]], **opts: object) -> None:
    async def go() -> None:
        async with running_front(support=support, answers=ANSWERS, listen=True, **opts) as front:
            front.state.model_name, front.state.model_names = "base", ["base"]
            await test(front)

    asyncio.run(go())


def _openai(front: Front) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{front.url}/v1", api_key="unused", max_retries=0)


@pytest.mark.parametrize(
    ("extra", "field", "capability"),
    [
        ({"presence_penalty": 0.5}, "presence_penalty", "penalties"),
        ({"extra_body": {"repetition_penalty": 1.2}}, "repetition_penalty", "penalties"),
        ({"logprobs": True, "top_logprobs": 2}, "logprobs", "logprobs"),
        ({"response_format": {"type": "json_object"}}, "response_format.type", "structured_outputs"),
        ({"extra_body": {"guided_regex": "[ab]+"}}, "guided_regex", "structured_outputs"),
        ({"extra_body": {"prompt_logprobs": 1}}, "prompt_logprobs", "prompt_logprobs"),
        ({"logit_bias": {"42": -100}}, "logit_bias", "penalties"),
        ({"extra_body": {"allowed_token_ids": [1, 2]}}, "allowed_token_ids", "penalties"),
        ({"extra_body": {"bad_words": ["x"]}}, "bad_words", "penalties"),
    ],
)
def test_openai_client_gets_400_naming_the_field_and_why(
    extra: dict[str, Any], field: str, capability: str
) -> None:
    async def test(front: Front) -> None:
        with pytest.raises(openai.BadRequestError) as err:
            await _openai(front).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2, **extra
            )
        assert err.value.status_code == 400
        message = err.value.body["message"]  # type: ignore[index]
        assert message.startswith(f"{field}=") and message.endswith(WHY[capability])
        assert front.seen == []

    _run(NEURON, test)


def test_openai_tool_choice_required_or_named_is_refused_and_auto_passes() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}

    async def test(front: Front) -> None:
        client = _openai(front)
        for choice in ("required", {"type": "function", "function": {"name": "f"}}):
            with pytest.raises(openai.BadRequestError) as err:
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], tools=[tool], tool_choice=choice
                )
            assert "tool_choice=" in str(err.value) and WHY["structured_outputs"] in str(err.value)
        assert front.seen == []
        out = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], tools=[tool], tool_choice="auto"
        )
        assert out.choices[0].message.content == "ok" and len(front.seen) == 1

    _run(NEURON, test)


def test_openai_client_defaults_pass_on_neuron() -> None:
    """Neutral values as clients send them by default reach the engine."""

    async def test(front: Front) -> None:
        out = await _openai(front).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            presence_penalty=0,
            frequency_penalty=0,
            logprobs=False,
            top_logprobs=0,
            temperature=0.5,
            top_p=0.9,
            logit_bias={},
            extra_body={
                "repetition_penalty": 1.0,
                "min_p": 0,
                "top_k": 20,
                "allowed_token_ids": [],
                "bad_words": [],
            },
        )
        assert out.choices[0].message.content == "ok"
        assert front.seen == [("POST", "/v1/chat/completions")]

    _run(NEURON, test)


def test_cpu_support_forwards_everything() -> None:
    """RequestSupport() (the CPU device): no behaviour change."""

    async def test(front: Front) -> None:
        out = await _openai(front).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            presence_penalty=0.5,
            logprobs=True,
            response_format={"type": "json_object"},
            logit_bias={"42": -100},
        )
        assert out.choices[0].message.content == "ok"
        r = await front.client.post("/generate", json={"inputs": "x", "parameters": {"top_n_tokens": 2}})
        assert r.status_code == 200, r.text
        assert [p for _, p in front.seen] == ["/v1/chat/completions", "/v1/completions"]
        assert front.bodies[0]["presence_penalty"] == 0.5 and front.bodies[1]["logprobs"] == 2

    _run(RequestSupport(), test)


@pytest.mark.parametrize(
    ("path", "body", "status", "shape"),
    [
        ("/invocations", {**CHAT, "frequency_penalty": 1.5}, 400, "openai"),
        ("/invocations", {"prompt": "x", "logprobs": 2}, 400, "openai"),
        ("/v1/completions", {"prompt": "x", "min_p": 0.1}, 400, "openai"),
        ("/v1/responses", {"input": "x", "text": {"format": {"type": "json_schema"}}}, 400, "openai"),
        ("/invocations", {"inputs": "x", "parameters": {"repetition_penalty": 1.3}}, 422, "openai"),
        ("/generate", {"inputs": "x", "parameters": {"top_n_tokens": 2}}, 422, "tgi"),
        ("/", {"inputs": "x", "parameters": {"decoder_input_details": True}}, 422, "tgi"),
        (
            "/generate_stream",
            {"inputs": "x", "parameters": {"grammar": {"type": "regex", "value": "a"}}},
            422,
            "tgi",
        ),
    ],
)
def test_each_dialect_refuses_in_its_own_shape(
    path: str, body: dict[str, Any], status: int, shape: str
) -> None:
    async def test(front: Front) -> None:
        r = await front.client.post(path, json=body)
        assert r.status_code == status, r.text
        doc = r.json()
        if shape == "openai":
            assert (
                doc["error"]["code"] == status
                and "cannot be served by this endpoint" in doc["error"]["message"]
            )
        else:
            assert doc["error_type"] == "validation" and "cannot be served by this endpoint" in doc["error"]
        assert front.seen == []

    _run(NEURON, test)


def test_lmi_dialect_refuses_with_424_in_its_shape() -> None:
    async def test(front: Front) -> None:
        body = {"inputs": "x", "parameters": {"presence_penalty": 0.3}}
        r = await front.client.post("/invocations", json=body)
        assert r.status_code == 424, r.text
        doc = r.json()
        assert doc["code"] == 424 and doc["error"].startswith("parameters.presence_penalty=0.3 cannot")
        assert doc["error"].endswith(WHY["penalties"])
        assert front.seen == []

    _run(NEURON, test, dialect="lmi")


def test_text_generation_client_refusal_and_details_without_logprobs() -> None:
    """TGI's own client sends details: true on every call: served, ids and texts, logprob None."""

    async def test(front: Front) -> None:
        client = AsyncClient(front.url, timeout=10)
        with pytest.raises(ValidationError, match=r"repetition_penalty=1\.3"):
            await client.generate("x", repetition_penalty=1.3)
        assert front.seen == []
        out = await client.generate("The capital of France is", max_new_tokens=2)
        assert out.generated_text == " Paris is"
        tokens = out.details.tokens  # type: ignore[union-attr]
        assert [(t.id, t.text, t.logprob) for t in tokens] == [(5, " Paris", None), (6, " is", None)]
        completion = front.bodies[front.seen.index(("POST", "/v1/completions"))]
        assert "logprobs" not in completion and completion["return_token_ids"] is True

    _run(NEURON, test)


def test_openai_model_selects_an_adapter_and_no_adapter_is_refused() -> None:
    async def test(front: Front) -> None:
        client = _openai(front)
        out = await client.chat.completions.create(model="b", messages=[{"role": "user", "content": "hi"}])
        assert out.model == "b" and front.bodies[-1]["model"] == "b"
        for model in ("base", "other"):
            with pytest.raises(openai.BadRequestError) as err:
                await client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": "hi"}]
                )
            assert "served adapters: a, b" in str(err.value)
        r = await front.client.post("/invocations", json={"messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 400 and "served adapters: a, b" in r.json()["error"]["message"]
        assert len(front.seen) == 1

    _run(LORA, test)


def test_adapter_name_survives_the_served_model_rewrite_when_not_required() -> None:
    """Adapters served, none required: an adapter's name is kept, any other name is the base model."""
    support = RequestSupport(lora_adapters=("a",))

    async def test(front: Front) -> None:
        client = _openai(front)
        await client.chat.completions.create(model="a", messages=[{"role": "user", "content": "hi"}])
        await client.chat.completions.create(model="tgi", messages=[{"role": "user", "content": "hi"}])
        assert [b["model"] for b in front.bodies] == ["a", "base"]

    _run(support, test)


@pytest.mark.parametrize(("path", "opts"), [("/generate", {}), ("/invocations", {"dialect": "lmi"})])
def test_tgi_adapter_id_selects_the_adapter(path: str, opts: dict[str, object]) -> None:
    async def test(front: Front) -> None:
        async with httpx.AsyncClient(base_url=front.url) as http:
            r = await http.post(
                path, json={"inputs": "x", "parameters": {"adapter_id": "a", "details": True}}
            )
            assert r.status_code == 200, r.text
            assert front.bodies[front.seen.index(("POST", "/v1/completions"))]["model"] == "a"
            before = len(front.seen)
            status = 424 if opts else 422
            for params in ({"adapter_id": "zzz"}, {}, {"adapter_id": ""}):
                r = await http.post(path, json={"inputs": "x", "parameters": params})
                assert r.status_code == status, r.text
                message = r.json()["error"]
                assert "served adapters: a, b" in message and "adapter_id" in message
            assert len(front.seen) == before

    _run(LORA, test, **opts)


def test_adapter_id_without_lora_is_refused_naming_none_served() -> None:
    async def test(front: Front) -> None:
        r = await front.client.post("/generate", json={"inputs": "x", "parameters": {"adapter_id": "a"}})
        assert r.status_code == 422
        assert r.json()["error"].endswith("is not a LoRA adapter this endpoint serves; served adapters: none")
        assert front.seen == []

    _run(RequestSupport(), test)
