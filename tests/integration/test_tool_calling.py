"""A tool-call round trip with the openai client against the CPU engine, configured with LMI's names.

OPTION_ENABLE_AUTO_TOOL_CHOICE / OPTION_TOOL_CALL_PARSER used to be dropped as unknown LMI settings:
`tool_choice: "auto"` is answered 400 by vLLM unless both flags reached it, so a 200 proves they did.
The tiny model has random weights, so the tool call itself is forced with a named tool choice (vLLM
constrains the arguments to the schema); the `pythonic` parser needs no special tokens in the tiny
tokenizer (hermes would). Starts its own server: runs after the shared server's tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI
from tests.support.server import Server, ServerPool, base_env

pytestmark = [pytest.mark.integration, pytest.mark.after_shared_server(7)]

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]


@pytest.fixture
def tool_server(
    server_pool: ServerPool, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Server:
    env = base_env(
        tiny_model,
        tmp_path_factory.mktemp("tools-work"),
        SM_VLLM_MAX_MODEL_LEN="512",
        SM_VLLM_MAX_NUM_SEQS="4",
        OPTION_ENABLE_AUTO_TOOL_CHOICE="true",
        OPTION_TOOL_CALL_PARSER="pythonic",
    )
    return server_pool.get("tools", env)


def test_tool_call_round_trip(tool_server: Server) -> None:
    client = OpenAI(base_url=f"{tool_server.url}/v1", api_key="unused", timeout=120)
    model = client.models.list().data[0].id
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]

    auto = client.chat.completions.create(
        model=model, messages=messages, tools=TOOLS, tool_choice="auto", max_tokens=8
    )
    assert auto.choices[0].message is not None  # 200: both flags reached vLLM

    named = client.chat.completions.create(
        model=model,
        messages=messages,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=64,
    )
    calls = named.choices[0].message.tool_calls
    assert calls and calls[0].function.name == "get_weather"  # type: ignore[union-attr]
    call = calls[0]
    assert json.loads(call.function.arguments)["city"] in ("Paris", "Rome")  # type: ignore[union-attr]

    messages += [
        {"role": "assistant", "tool_calls": [call.model_dump(exclude_none=True)]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"celsius": 21})},
    ]
    answer = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, max_tokens=8)
    assert answer.choices[0].finish_reason in ("stop", "length")
