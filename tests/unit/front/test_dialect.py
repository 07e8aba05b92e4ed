"""Strict model names; what each dialect answers when a request is refused or its stream breaks (the
dialect a configuration selects is tested with config/serve.py, tests/unit/config/test_serve.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tests.support.front_app import running_front

from neuronserve.front import genparams, lmi
from neuronserve.front.adapters import served_model_body
from neuronserve.front.app import openai_object
from neuronserve.front.dialect import LMI, OPENAI, TGI, TGI_INVOCATIONS, Dialect, Framing
from neuronserve.front.errors import (
    EngineRefused,
    EngineTimeout,
    FrontError,
    Invalid,
    NotReady,
    Overloaded,
)
from neuronserve.front.proxy import StreamBroken
from neuronserve.front.state import ServerState
from neuronserve.types import ServeOptions


def _state(*names: str) -> ServerState:
    state = ServerState()
    state.model_names = list(names)
    return state


@pytest.mark.parametrize("body", [b'{"model": "tgi", "prompt": "x"}', b'{"prompt": "x"}', b'{"model": ""}'])
def test_other_model_names_are_served_by_the_one_model(body: bytes) -> None:
    out = served_model_body(openai_object(body), _state("m"), ServeOptions())
    assert out is not None and b'"model": "m"' in out


@pytest.mark.parametrize("body", [b'{"model": "gpt-4o", "input": "x"}', b'{"input": "x"}'])
def test_with_adapters_served_another_name_is_the_base_model(body: bytes) -> None:
    """LoRA on: /v1/models lists the base model, then the adapters; an unknown name is the base model's."""
    out = served_model_body(openai_object(body), _state("m", "sql-lora"), ServeOptions())
    assert out is not None and json.loads(out)["model"] == "m"


@pytest.mark.parametrize(
    ("body", "state", "opts"),
    [
        (b'{"model": "tgi"}', _state("m"), ServeOptions(strict_model_name=True)),  # strict: vLLM's 404
        (b'{"model": "lora"}', _state("m", "lora"), ServeOptions()),  # a served adapter: as sent
        (b'{"model": "m"}', _state("m", "lora"), ServeOptions()),  # the base model beside adapters
        (b'{"model": "tgi"}', _state(), ServeOptions()),  # no model known yet: the engine decides
        (b'{"model": "m"}', _state("m"), ServeOptions()),  # already right: forwarded as sent
    ],
)
def test_bodies_left_alone(body: bytes, state: ServerState, opts: ServeOptions) -> None:
    assert served_model_body(openai_object(body), state, opts) is None


NAMED = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/embeddings",
    "/tokenize",
    "/detokenize",
]


@pytest.mark.parametrize("path", NAMED)
@pytest.mark.parametrize("strict", [False, True])
def test_every_route_whose_body_names_a_model_is_served_by_the_one_model(path: str, strict: bool) -> None:
    """`/v1/*` serves any model name (README): /v1/responses got vLLM's 404 for "gpt-4o" when only chat
    and completions were rewritten. NEURONSERVE_STRICT_MODEL_NAME=true forwards the name as sent."""

    async def go() -> list[Any]:
        async with running_front(strict_model_name=strict) as front:
            front.state.model_names = ["m"]
            routed = path.startswith("/v1/")  # a custom-attribute route must start with /v1/
            for via in (path, "/invocations") if routed else (path,):
                headers = {"x-amzn-sagemaker-custom-attributes": f"route={path}"} if via != path else {}
                r = await front.client.post(via, json={"model": "gpt-4o", "input": "x"}, headers=headers)
                assert r.status_code == 200, r.text
            return front.bodies

    bodies = asyncio.run(go())
    assert bodies and {b["model"] for b in bodies} == ({"gpt-4o"} if strict else {"m"})


@pytest.mark.parametrize("body", [b"not json", b"\x80", b"[1]", b"[" * 100 + b"]" * 100, b"[" * 100_000])
def test_bodies_that_are_not_objects_are_400(body: bytes) -> None:
    with pytest.raises(FrontError) as err:
        openai_object(body)
    assert err.value.status == 400


# Each dialect answers a refusal in its own body and status (dialect.py); the route picks the dialect.
@pytest.mark.parametrize(
    ("dialect", "err", "status", "body"),
    [
        (OPENAI, Invalid("no"), 422, {"error": {"message": "no", "type": "ValidationError", "code": 422}}),
        (
            TGI_INVOCATIONS,
            Invalid("no"),
            422,
            {"error": {"message": "no", "type": "ValidationError", "code": 422}},
        ),
        (TGI, Invalid("no"), 422, {"error": "no", "error_type": "validation"}),
        (TGI, Overloaded("busy"), 429, {"error": "busy", "error_type": "overloaded"}),
        (
            TGI,
            EngineRefused(400, "engine says no"),
            400,
            {"error": "engine says no", "error_type": "generation"},
        ),
        (TGI, EngineTimeout("slow"), 504, {"error": "slow", "error_type": "error"}),
        (LMI, Invalid("no"), 424, {"error": "no", "code": 424}),
        (LMI, NotReady("later"), 503, {"error": "later", "code": 503}),
    ],
)
def test_each_dialect_owns_its_error_body(
    dialect: Dialect, err: FrontError, status: int, body: object
) -> None:
    resp = dialect.error_response(err)
    assert resp.status_code == status and json.loads(bytes(resp.body)) == body


@pytest.mark.parametrize(
    ("dialect", "status", "event"),
    [
        (OPENAI, 504, {"error": {"message": "cut", "type": "GatewayTimeoutError", "code": 504}}),
        (TGI, 503, {"error": "cut", "error_type": "overloaded"}),
        (TGI_INVOCATIONS, 502, {"error": "cut", "error_type": "incomplete_generation"}),
        (LMI, 502, lmi.stream_error_event()),
    ],
)
def test_each_dialect_owns_its_stream_error(dialect: Dialect, status: int, event: object) -> None:
    assert dialect.stream_error(StreamBroken(status, "cut")) == event


def test_the_passthrough_dialect_shapes_no_generate_answer() -> None:
    with pytest.raises(NotImplementedError):
        OPENAI.response(genparams.translate({"inputs": "x"}, "x", None), [])


def test_the_framing_frames_stream_events_as_json_lines_or_sse() -> None:
    lines, sse = Framing(LMI, listed=False, jsonlines=True), Framing(TGI, listed=False)
    assert (lines.media_type, sse.media_type) == ("application/jsonlines", "text/event-stream")
    assert lines.encode({"text": "é"}) == '{"text": "é"}\n'.encode()
    assert sse.encode({"text": "é"}) == 'data:{"text": "é"}\n\n'.encode()
