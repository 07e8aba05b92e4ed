"""The vectors of vLLM 0.11.0's advisories (fixed in 0.11.1) on the allowlisted routes: refused by the
real front, citing the advisory, before anything reaches the (stand-in) engine; the harmless uses
pass through unchanged."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.support.front_app import running_front

from neuronserve.front import advisories

CHAT = {"messages": [{"role": "user", "content": "hi"}]}
EMBEDS_PART = {"type": "image_embeds", "image_embeds": "AAAA"}

REFUSED: list[tuple[str, dict[str, Any], str]] = [
    (
        "/v1/chat/completions",
        {**CHAT, "chat_template_kwargs": {"tokenize": True}},
        advisories.CHAT_TEMPLATE_KWARGS,
    ),
    (
        "/tokenize",
        {**CHAT, "chat_template_kwargs": {"chat_template": "{% for x in range(99999) %}"}},
        advisories.CHAT_TEMPLATE_KWARGS,
    ),
    (
        "/invocations",
        {**CHAT, "chat_template_kwargs": {"padding": "max_length"}},
        advisories.CHAT_TEMPLATE_KWARGS,
    ),
    (
        "/v1/chat/completions",
        {**CHAT, "chat_template_kwargs": {"enable_thinking": ["x"] * 1000}},
        advisories.CHAT_TEMPLATE_KWARGS,
    ),
    ("/v1/chat/completions", {**CHAT, "chat_template_kwargs": "tokenize"}, advisories.CHAT_TEMPLATE_KWARGS),
    ("/v1/completions", {"prompt_embeds": "UEsDBA==", "prompt": ""}, advisories.PROMPT_EMBEDS),
    ("/invocations", {"prompt": "x", "prompt_embeds": ["UEsDBA=="]}, advisories.PROMPT_EMBEDS),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": [EMBEDS_PART]}]},
        advisories.MM_EMBEDS,
    ),
]


@pytest.mark.parametrize(("path", "body", "advisory"), REFUSED)
def test_advisory_vectors_are_refused_citing_the_advisory(
    path: str, body: dict[str, Any], advisory: str
) -> None:
    async def go() -> None:
        async with running_front() as front:
            r = await front.client.post(path, json=body)
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert advisory in err["message"] and err["type"] == "BadRequestError"
            assert front.seen == []

    asyncio.run(go())


def test_routed_invocations_are_checked_too() -> None:
    async def go() -> None:
        async with running_front() as front:
            body = {**CHAT, "chat_template_kwargs": {"tokenize": True}}
            headers = {"x-amzn-sagemaker-custom-attributes": "route=/v1/chat/completions"}
            r = await front.client.post("/invocations", json=body, headers=headers)
            assert r.status_code == 400 and advisories.CHAT_TEMPLATE_KWARGS in r.text
            assert front.seen == []

    asyncio.run(go())


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {**CHAT, "chat_template_kwargs": {"enable_thinking": False}}),
        ("/tokenize", {**CHAT, "chat_template_kwargs": {"thinking": True, "reasoning_effort": "low"}}),
        ("/v1/chat/completions", {**CHAT, "chat_template_kwargs": None}),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]},
        ),
        ("/v1/completions", {"prompt": "x", "prompt_embeds": None}),
    ],
)
def test_harmless_uses_pass(path: str, body: dict[str, Any]) -> None:
    async def go() -> None:
        async with running_front() as front:
            r = await front.client.post(path, json=body)
            assert r.status_code == 200, r.text
            assert [p for _, p in front.seen] == [path]

    asyncio.run(go())


def test_embeds_pass_when_enabled() -> None:
    async def go() -> None:
        async with running_front(allow_prompt_embeds=True) as front:
            r = await front.client.post("/v1/completions", json={"prompt_embeds": "UEsDBA==", "prompt": ""})
            assert r.status_code == 200, r.text
            chat = {"messages": [{"role": "user", "content": [EMBEDS_PART]}]}
            assert (await front.client.post("/v1/chat/completions", json=chat)).status_code == 200
            # the template kwargs stay checked: that advisory has no opt-in
            bad = {**CHAT, "chat_template_kwargs": {"tokenize": True}}
            assert (await front.client.post("/v1/chat/completions", json=bad)).status_code == 400

    asyncio.run(go())
