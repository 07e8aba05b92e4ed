"""SageMaker's adapter header (front/adapters.py) through the real front app and gate, in front of a
recording stand-in engine (tests/support/front_app.py): the header selects a served LoRA adapter as
the OpenAI `model` and TGI's `adapter_id` do, on every body /invocations takes; an unknown adapter is a
4xx naming the served ones in the dialect's shape (OpenAI 400, TGI 422, LMI 424), and a body naming
another served adapter conflicts; nothing refused reaches the engine."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from tests.support.builders import LORA_ENV, asset_plan
from tests.support.front_app import Front, running_front

from neuronserve.front.adapters import (
    ADAPTER_HEADER,
    ADAPTER_HEADER_NAME,
    generate_with_adapter,
    header_adapter,
)
from neuronserve.front.errors import Invalid
from neuronserve.types import RequestSupport

LORA = asset_plan(LORA_ENV).request_support  # adapters a and b, one required on every request
CHAT = [{"role": "user", "content": "hi"}]


def _run(support: RequestSupport, test: Callable[[Front], Awaitable[None]], **opts: object) -> None:
    async def go() -> None:
        async with running_front(support=support, **opts) as front:
            front.state.model_name, front.state.model_names = "base", ["base"]
            await test(front)

    asyncio.run(go())


def _with(name: str) -> dict[str, str]:
    return {ADAPTER_HEADER: name}


def test_the_header_is_the_adapter_name_blank_is_none() -> None:
    assert header_adapter(None) is None
    assert header_adapter("  ") is None
    assert header_adapter(" a ") == "a"


@pytest.mark.parametrize(
    ("body", "engine_path"),
    [
        ({"messages": CHAT}, "/v1/chat/completions"),
        ({"prompt": "hi", "model": "base"}, "/v1/completions"),  # the base model's name: replaced
        ({"prompt": "hi", "model": "tgi"}, "/v1/completions"),  # a client's placeholder: replaced
        ({"prompt": "hi", "model": "a"}, "/v1/completions"),  # the same adapter: agreed
    ],
)
def test_openai_bodies_reach_the_engine_with_the_headers_adapter(
    body: dict[str, Any], engine_path: str
) -> None:
    async def test(front: Front) -> None:
        r = await front.client.post("/invocations", json=body, headers=_with("a"))
        assert r.status_code == 200, r.text
        assert front.seen == [("POST", engine_path)] and front.bodies[-1]["model"] == "a"

    _run(LORA, test)


def test_a_routed_body_takes_the_adapter_too() -> None:
    async def test(front: Front) -> None:
        r = await front.client.post(
            "/invocations",
            json={"prompt": "hi"},
            headers={**_with("b"), "X-Amzn-SageMaker-Custom-Attributes": "route=/v1/completions"},
        )
        assert r.status_code == 200, r.text
        assert front.bodies == [{"prompt": "hi", "model": "b"}]

    _run(LORA, test)


def test_openai_unknown_adapter_and_conflict_are_400_and_never_reach_the_engine() -> None:
    async def test(front: Front) -> None:
        r = await front.client.post("/invocations", json={"prompt": "hi"}, headers=_with("zzz"))
        assert r.status_code == 400
        assert r.json()["error"]["message"] == (
            "X-Amzn-SageMaker-Adapter-Identifier='zzz' names no LoRA adapter this endpoint serves; "
            "served adapters: a, b"
        )
        r = await front.client.post("/invocations", json={"prompt": "hi", "model": "b"}, headers=_with("a"))
        assert r.status_code == 400
        message = r.json()["error"]["message"]
        assert (
            "model='b'" in message
            and "X-Amzn-SageMaker-Adapter-Identifier='a'" in message
            and "different" in message
        )
        assert front.seen == []

    _run(LORA, test)


def test_no_adapter_served_names_none() -> None:
    async def test(front: Front) -> None:
        r = await front.client.post("/invocations", json={"prompt": "hi"}, headers=_with("a"))
        assert r.status_code == 400 and r.json()["error"]["message"].endswith("served adapters: none")
        r = await front.client.post("/invocations", json={"prompt": "hi"}, headers=_with(" "))  # no header
        assert r.status_code == 200 and front.bodies == [{"prompt": "hi", "model": "base"}]

    _run(RequestSupport(), test)


@pytest.mark.parametrize(("opts", "status"), [({}, 422), ({"dialect": "lmi"}, 424)])
def test_generate_bodies_take_the_adapter_and_refuse_in_their_dialect(
    opts: dict[str, object], status: int
) -> None:
    async def test(front: Front) -> None:
        for params in ({}, {"adapter_id": "b"}, {"adapter_id": ""}):
            r = await front.client.post(
                "/invocations", json={"inputs": "x", "parameters": params}, headers=_with("b")
            )
            assert r.status_code == 200, r.text
            assert front.bodies[-1]["model"] == "b"
        served = len(front.seen)
        for params, expected in (
            ({}, "served adapters: a, b"),
            ({"adapter_id": "a"}, "name different LoRA adapters"),
        ):
            name = "zzz" if not params else "b"
            r = await front.client.post(
                "/invocations", json={"inputs": "x", "parameters": params}, headers=_with(name)
            )
            assert r.status_code == status, r.text
            assert expected in r.text and ADAPTER_HEADER_NAME in r.text
        assert len(front.seen) == served

    _run(LORA, test, **opts)


def test_generate_body_without_a_header_is_unchanged() -> None:
    body = {"inputs": "x", "parameters": {"adapter_id": 5}}
    assert generate_with_adapter(body, None, LORA) is body
    assert generate_with_adapter(body, "a", LORA) is body  # not a string: genparams refuses it by name
    with pytest.raises(Invalid, match="served adapters: a, b"):
        generate_with_adapter({"inputs": "x"}, "c", LORA)
    assert generate_with_adapter({"inputs": "x", "parameters": None}, "a", LORA)["parameters"] == {
        "adapter_id": "a"
    }


@pytest.mark.parametrize(
    ("asked", "reaches"), [("gpt-4o", "base"), (None, "base"), ("base", "base"), ("a", "a"), ("b", "b")]
)
@pytest.mark.parametrize("path", ["/v1/responses", "/v1/chat/completions", "/invocations"])
def test_lora_on_the_cpu_another_model_name_is_the_base_model(
    asked: str | None, reaches: str, path: str
) -> None:
    """LoRA on an engine that serves base-model requests (the CPU device: no adapter required), which
    lists the base model then its adapters in /v1/models: a served adapter's name reaches the engine as
    sent, any other name is the base model's (before: forwarded, and vLLM answered 404)."""
    support = RequestSupport(lora_adapters=("a", "b"))
    body: dict[str, Any] = {"input": "hi"} if path == "/v1/responses" else {"messages": CHAT}
    if asked is not None:
        body["model"] = asked

    async def go() -> None:
        async with running_front(support=support) as front:
            front.state.model_name, front.state.model_names = "base", ["base", "a", "b"]
            r = await front.client.post(path, json=body)
            assert r.status_code == 200, r.text
            assert front.bodies[-1]["model"] == reaches

    asyncio.run(go())
