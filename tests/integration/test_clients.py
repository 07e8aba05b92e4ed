"""The official client libraries, unchanged, against `neuronserve serve` with a real vLLM on the CPU.

text_generation.Client (TGI's own client: posts to `/`), huggingface_hub.InferenceClient (pointed at
/invocations, and at /v1 for chat) and openai (any model name). The tiny model has random weights:
tests check protocol and shapes, and that grammars constrain the output.
"""

from __future__ import annotations

import json
import re
import time

import httpx
import huggingface_hub.constants
import pytest
from huggingface_hub import InferenceClient
from openai import OpenAI
from tests.support.server import Server
from text_generation import Client

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _hub_client_online(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test session sets HF_HUB_OFFLINE=1 (no hub downloads), which also stops
    huggingface_hub's client from reaching ANY URL, 127.0.0.1 included. Users do not set it."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)


def test_text_generation_generate_with_details(server: Server) -> None:
    client = Client(server.url, timeout=60)
    out = client.generate("hello", max_new_tokens=5, decoder_input_details=True)
    assert out.generated_text == "".join(t.text for t in out.details.tokens)
    assert out.details.generated_tokens == 5 == len(out.details.tokens)
    assert out.details.finish_reason.value == "length"
    assert all(isinstance(t.id, int) and t.logprob is not None for t in out.details.tokens)
    prefill = out.details.prefill
    assert prefill and prefill[0].logprob is None and all(p.logprob is not None for p in prefill[1:])


def test_text_generation_top_n_tokens(server: Server) -> None:
    client = Client(server.url, timeout=60)
    out = client.generate("hello", max_new_tokens=4, top_n_tokens=3)
    tops = out.details.top_tokens
    assert tops is not None and len(tops) == 4
    for row, chosen in zip(tops, out.details.tokens, strict=True):
        assert 1 <= len(row) <= 4  # the top 3 (+ the chosen one when it is not among them)
        assert all(t.id >= 0 for t in row)
        assert chosen.id in {t.id for t in row} or len(row) == 4
    # greedy: the chosen token is the most likely one
    assert out.details.tokens[0].id == max(tops[0], key=lambda t: t.logprob or -1e9).id
    assert all(isinstance(t.text, str) for row in tops for t in row)


def test_text_generation_stream(server: Server) -> None:
    client = Client(server.url, timeout=60)
    events = list(client.generate_stream("hello", max_new_tokens=6, top_n_tokens=2))
    assert len(events) == 6
    assert all(e.generated_text is None for e in events[:-1])
    last = events[-1]
    assert last.generated_text == "".join(e.token.text for e in events)
    assert last.details is not None and last.details.generated_tokens == 6
    assert all(e.top_tokens for e in events)


def test_text_generation_best_of(server: Server) -> None:
    client = Client(server.url, timeout=60)
    out = client.generate("hello", max_new_tokens=4, do_sample=True, best_of=2)
    assert out.details.best_of_sequences is not None and len(out.details.best_of_sequences) == 1
    other = out.details.best_of_sequences[0]
    score = sum(t.logprob or 0 for t in out.details.tokens)
    assert score >= sum(t.logprob or 0 for t in other.tokens)


def test_text_generation_refusals_are_tgi_errors(server: Server) -> None:
    from text_generation.errors import ValidationError

    client = Client(server.url, timeout=60)
    with pytest.raises(ValidationError, match="watermark"):
        client.generate("hello", max_new_tokens=2, watermark=True)


def test_inference_client_text_generation(server: Server) -> None:
    client = InferenceClient(model=f"{server.url}/invocations", timeout=60)
    text = client.text_generation("hello", max_new_tokens=5)
    assert isinstance(text, str) and text
    out = client.text_generation("hello", max_new_tokens=5, details=True, seed=3, truncate=2)
    assert out.details is not None and out.details.generated_tokens == 5 and out.details.seed == 3
    streamed = list(client.text_generation("hello", max_new_tokens=5, stream=True))
    assert len(streamed) == 5 and all(isinstance(t, str) for t in streamed)
    assert "".join(streamed) == text  # greedy both times


def test_inference_client_regex_grammar(server: Server) -> None:
    client = InferenceClient(model=f"{server.url}/invocations", timeout=120)
    text = client.text_generation(
        "hello", max_new_tokens=12, grammar={"type": "regex", "value": "(ab|cd){3}"}
    )
    assert re.fullmatch("(ab|cd){3}", text), text


def test_inference_client_json_grammar(server: Server) -> None:
    client = InferenceClient(model=f"{server.url}/invocations", timeout=120)
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    out = client.text_generation(
        "hello", max_new_tokens=40, grammar={"type": "json", "value": schema}, details=True
    )
    # vLLM's JSON grammar allows blanks between tokens, and a random model may spend every token
    # on them: what was generated must still be a prefix of a document the schema accepts.
    compact = re.sub(r"\s", "", out.generated_text)
    assert compact and any(doc.startswith(compact) for doc in ('{"ok":true}', '{"ok":false}')), (
        out.generated_text
    )
    assert out.details is not None
    if out.details.finish_reason == "eos_token":
        assert isinstance(json.loads(out.generated_text)["ok"], bool)


def test_inference_client_chat_through_base_url(server: Server) -> None:
    client = InferenceClient(base_url=f"{server.url}/v1", timeout=60)
    out = client.chat_completion([{"role": "user", "content": "hi"}], max_tokens=4)
    assert out.choices[0].message.content is not None
    chunks = list(client.chat_completion([{"role": "user", "content": "hi"}], max_tokens=4, stream=True))
    assert chunks


@pytest.mark.parametrize("model", ["tgi", "dummy", ""])
def test_openai_any_model_name(server: Server, model: str) -> None:
    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", timeout=60)
    chat = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    assert chat.choices[0].message.content is not None
    comp = client.completions.create(model=model, prompt="hello", max_tokens=3)
    assert comp.choices[0].text
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=3, stream=True
    )
    assert [c for c in stream if c.choices]
    stream2 = client.completions.create(model=model, prompt="hello", max_tokens=3, stream=True)
    assert "".join(c.choices[0].text for c in stream2 if c.choices)


def test_invocations_openai_body_with_another_model_name(server: Server) -> None:
    for body in (
        {"model": "tgi", "prompt": "hi", "max_tokens": 2},
        {"model": "", "messages": [{"role": "user", "content": "x"}]},
    ):
        r = httpx.post(f"{server.url}/invocations", json={**body, "max_tokens": 2}, timeout=60)
        assert r.status_code == 200, r.text


def test_tgi_routes_and_info(server: Server) -> None:
    info = httpx.get(f"{server.url}/info", timeout=30).json()
    models = httpx.get(f"{server.url}/v1/models", timeout=30).json()["data"][0]
    assert info["model_id"] == models["id"]
    assert info["max_total_tokens"] == models["max_model_len"] == 512
    assert info["max_input_tokens"] == 511 and info["max_concurrent_requests"] == 6
    assert isinstance(info["model_dtype"], str) and isinstance(info["version"], str)
    assert httpx.get(f"{server.url}/health", timeout=30).status_code == 200
    r = httpx.post(
        f"{server.url}/generate", json={"inputs": "hello", "parameters": {"max_new_tokens": 3}}, timeout=60
    )
    assert r.status_code == 200 and isinstance(r.json()["generated_text"], str)  # one object
    r = httpx.post(
        f"{server.url}/", json={"inputs": "hello", "parameters": {"max_new_tokens": 3}}, timeout=60
    )
    assert r.status_code == 200 and isinstance(r.json(), list)  # the compat route: a list
    r = httpx.post(
        f"{server.url}/generate", json={"inputs": "hello", "parameters": {"typical_p": 0.5}}, timeout=60
    )
    assert r.status_code == 422
    assert r.json()["error_type"] == "validation" and "typical_p" in r.json()["error"]


def test_list_inputs_answer_in_order(server: Server) -> None:
    prompts = ["hello", "the capital of france is", "one two three"]
    singles = [
        httpx.post(
            f"{server.url}/invocations", json={"inputs": p, "parameters": {"max_new_tokens": 4}}, timeout=60
        ).json()[0]
        for p in prompts
    ]
    r = httpx.post(
        f"{server.url}/invocations", json={"inputs": prompts, "parameters": {"max_new_tokens": 4}}, timeout=60
    )
    assert r.status_code == 200, r.text
    assert r.json() == singles  # greedy: the same text per prompt, in order


def test_request_id_forwarded_echoed_and_logged(server: Server) -> None:
    r = httpx.post(
        f"{server.url}/invocations",
        json={"inputs": "hello", "parameters": {"max_new_tokens": 2}},
        headers={"X-Request-Id": "rid-from-client-1"},
        timeout=60,
    )
    assert r.status_code == 200 and r.headers["x-request-id"] == "rid-from-client-1"
    r = httpx.post(f"{server.url}/v1/completions", json={"prompt": "hi", "max_tokens": 2}, timeout=60)
    generated = r.headers["x-request-id"]
    assert re.fullmatch("[0-9a-f]{32}", generated)
    r = httpx.get(
        f"{server.url}/invocations", headers={"X-Amzn-SageMaker-Inference-Id": "sm-id-7"}, timeout=30
    )
    assert r.headers["x-request-id"] == "sm-id-7"
    for rid in ("rid-from-client-1", generated, "sm-id-7"):
        for _ in range(50):
            if f"request_id={rid}" in server.log():
                break
            time.sleep(0.05)
        assert f"request_id={rid}" in server.log(), rid
    # the engine got the id: vLLM names its completion after X-Request-Id
    r = httpx.post(
        f"{server.url}/v1/completions",
        json={"prompt": "hi", "max_tokens": 2},
        headers={"X-Request-Id": "rid-for-engine"},
        timeout=60,
    )
    assert "rid-for-engine" in r.json()["id"]
