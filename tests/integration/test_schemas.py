"""Each request schema through /invocations, streamed and not, plus the OpenAI routes on :8080."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from tests.support.server import Server

from neuronserve.front.sse import LineParser, SSEParser

pytestmark = pytest.mark.integration


def _sse(raw: bytes) -> list[str]:
    parser = SSEParser()
    return parser.feed(raw) + parser.close()


def test_chat(server: Server) -> None:
    r = httpx.post(
        f"{server.url}/invocations",
        json={"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["usage"]["completion_tokens"] >= 1


def test_completion(server: Server) -> None:
    r = httpx.post(f"{server.url}/invocations", json={"prompt": "hello", "max_tokens": 4}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["object"] == "text_completion"


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 6, "stream": True},
        {"prompt": "hello", "max_tokens": 6, "stream": True},
    ],
    ids=["chat", "completion"],
)
def test_openai_stream_is_sse_until_done(server: Server, body: dict[str, object]) -> None:
    with httpx.stream("POST", f"{server.url}/invocations", json=body, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = b"".join(r.iter_raw())
    events = _sse(raw)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks and all("choices" in c for c in chunks)


def test_tgi_generate(server: Server) -> None:
    r = httpx.post(
        f"{server.url}/invocations",
        json={"inputs": "hello", "parameters": {"max_new_tokens": 5, "do_sample": False}},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert isinstance(body, list) and list(body[0]) == ["generated_text"]
    assert isinstance(body[0]["generated_text"], str) and body[0]["generated_text"]


def test_tgi_details_and_full_text(server: Server) -> None:
    params = {"max_new_tokens": 4, "details": True, "return_full_text": True, "seed": 7, "top_n_tokens": 2}
    r = httpx.post(f"{server.url}/invocations", json={"inputs": "hello", "parameters": params}, timeout=60)
    assert r.status_code == 200, r.text
    item = r.json()[0]
    assert item["generated_text"].startswith("hello")
    details = item["details"]
    assert details["generated_tokens"] == 4 == len(details["tokens"])
    assert details["finish_reason"] == "length"
    assert details["seed"] == 7
    tok = details["tokens"][0]
    assert isinstance(tok["id"], int) and isinstance(tok["logprob"], float) and isinstance(tok["text"], str)
    assert "".join(t["text"] for t in details["tokens"]) == item["generated_text"][len("hello") :]
    assert len(details["top_tokens"][0]) >= 1


def test_tgi_stream_sse(server: Server) -> None:
    body = {"inputs": "hello", "parameters": {"max_new_tokens": 5, "details": True}, "stream": True}
    with httpx.stream("POST", f"{server.url}/invocations", json=body, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = b"".join(r.iter_raw())
    assert raw.startswith(b"data:{")
    events = [json.loads(e) for e in _sse(raw)]
    assert len(events) == 5
    assert all(e["generated_text"] is None for e in events[:-1])
    assert events[-1]["generated_text"] == "".join(e["token"]["text"] for e in events)
    assert events[-1]["details"]["finish_reason"] == "length"
    assert events[-1]["details"]["generated_tokens"] == 5


def test_tgi_stream_jsonlines(server: Server) -> None:
    body = {"inputs": "hello", "parameters": {"max_new_tokens": 4}, "stream": True}
    headers = {"accept": "application/jsonlines"}
    with httpx.stream("POST", f"{server.url}/invocations", json=body, headers=headers, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/jsonlines")
        raw = b"".join(r.iter_raw())
    parser = LineParser()
    lines = [json.loads(x) for x in parser.feed(raw) + parser.close()]
    assert lines and all("token" in line for line in lines)
    assert lines[-1]["generated_text"] == "".join(x["token"]["text"] for x in lines)


def test_custom_attributes_route(server: Server) -> None:
    # A completion body sent to the chat route on purpose: the engine's own 400 proves the route was used.
    headers = {"X-Amzn-SageMaker-Custom-Attributes": "route=/v1/chat/completions"}
    r = httpx.post(
        f"{server.url}/invocations", json={"prompt": "hi", "max_tokens": 2}, headers=headers, timeout=60
    )
    assert r.status_code == 400
    assert "messages" in r.text
    headers = {"X-Amzn-SageMaker-Custom-Attributes": "trace=1; route=/v1/completions"}
    r = httpx.post(
        f"{server.url}/invocations", json={"prompt": "hi", "max_tokens": 2}, headers=headers, timeout=60
    )
    assert r.status_code == 200
    assert r.json()["object"] == "text_completion"


def test_openai_routes_and_metrics_on_the_same_port(server: Server) -> None:
    models = httpx.get(f"{server.url}/v1/models", timeout=30).json()
    name = models["data"][0]["id"]
    r = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": name, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
        timeout=60,
    )
    assert r.status_code == 200 and r.json()["choices"]
    r = httpx.post(
        f"{server.url}/v1/completions", json={"model": name, "prompt": "hi", "max_tokens": 3}, timeout=60
    )
    assert r.status_code == 200 and r.json()["choices"]
    metrics = httpx.get(f"{server.url}/metrics", timeout=30)
    assert metrics.status_code == 200 and "vllm:" in metrics.text


def test_one_log_line_per_request_with_request_id(server: Server) -> None:
    rid = "test-rid-4711"
    r = httpx.post(
        f"{server.url}/invocations",
        json={"prompt": "hi", "max_tokens": 3},
        headers={"X-Amzn-SageMaker-Inference-Id": rid},
        timeout=60,
    )
    assert r.status_code == 200
    lines: list[str] = []
    for _ in range(50):  # the line is written right after the last byte is sent
        lines = [ln for ln in server.log().splitlines() if f"request_id={rid}" in ln]
        if lines:
            break
        time.sleep(0.05)
    assert len(lines) == 1
    assert "status=200" in lines[0] and "tokens_out=3" in lines[0] and "latency_ms=" in lines[0]
