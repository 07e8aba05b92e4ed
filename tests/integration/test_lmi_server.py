"""An LMI-configured server (OPTION_MODEL_ID) answers in LMI's rolling-batch shapes.

Reference: djl-serving serving/docs/lmi/user_guides/lmi_input_output_schema.md. Marked to run after
the shared server's tests (one engine at a time on this machine: this starts its own).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from tests.support.server import Server, ServerPool, base_env

from neuronserve.front.sse import LineParser, SSEParser

pytestmark = [pytest.mark.integration, pytest.mark.after_shared_server(3)]


@pytest.fixture
def lmi_server(server_pool: ServerPool, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Server:
    env = base_env(tiny_model, tmp_path_factory.mktemp("lmi-work"))
    del env["SM_VLLM_MODEL"]
    env.update(OPTION_MODEL_ID=str(tiny_model), OPTION_MAX_MODEL_LEN="512", OPTION_MAX_ROLLING_BATCH_SIZE="4")
    return server_pool.get("lmi", env)


def _post(server: Server, body: dict[str, object]) -> httpx.Response:
    return httpx.post(f"{server.url}/invocations", json=body, timeout=60)


def test_lmi_answer_is_an_object_with_lmi_details(lmi_server: Server) -> None:
    r = _post(lmi_server, {"inputs": "hello", "parameters": {"max_new_tokens": 4, "details": True}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert isinstance(body, dict) and isinstance(body["generated_text"], str)
    details = body["details"]
    assert details["inputs"] == "hello" and details["generated_tokens"] == 4
    assert details["finish_reason"] == "length"
    assert [set(t) for t in details["tokens"]] == [{"id", "text", "log_prob"}] * 4
    assert "".join(t["text"] for t in details["tokens"]) == body["generated_text"]


def test_lmi_parameter_names(lmi_server: Server) -> None:
    params = {
        "max_new_tokens": 6,
        "stop_sequences": ["zzzz"],
        "ignore_eos_token": True,
        "n": 2,
        "do_sample": True,
        "logprobs": 2,
        "prompt_logprobs": 1,
        "details": True,
        "top_k": -1,
    }
    r = _post(lmi_server, {"inputs": "hello", "parameters": params})
    assert r.status_code == 200, r.text
    details = r.json()["details"]
    assert len(details["best_of_sequences"]) == 1
    assert details["prefill"] and details["prefill"][0]["log_prob"] is None


def test_lmi_stream_is_jsonlines_with_log_prob(lmi_server: Server) -> None:
    body = {"inputs": "hello", "parameters": {"max_new_tokens": 5, "details": True}, "stream": True}
    with httpx.stream("POST", f"{lmi_server.url}/invocations", json=body, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/jsonlines")
        raw = b"".join(r.iter_raw())
    parser = LineParser()
    lines = [json.loads(x) for x in parser.feed(raw) + parser.close()]
    assert len(lines) == 5 and all(set(line["token"]) == {"id", "text", "log_prob"} for line in lines)
    assert "generated_text" not in lines[0]
    assert lines[-1]["generated_text"] == "".join(x["token"]["text"] for x in lines)
    assert lines[-1]["details"] == {"finish_reason": "length", "generated_tokens": 5, "inputs": "hello"}


def test_lmi_list_inputs_and_errors(lmi_server: Server) -> None:
    r = _post(lmi_server, {"inputs": ["hello", "one two"], "parameters": {"max_new_tokens": 3}})
    assert r.status_code == 200, r.text
    assert [set(x) for x in r.json()] == [{"generated_text"}] * 2
    r = _post(lmi_server, {"inputs": "hello", "parameters": {"max_new_tokens": "many"}})
    assert r.status_code == 424 and r.json()["code"] == 424 and "max_new_tokens" in r.json()["error"]


def test_tgi_routes_keep_tgi_shapes_on_an_lmi_server(lmi_server: Server) -> None:
    r = httpx.post(
        f"{lmi_server.url}/", json={"inputs": "hello", "parameters": {"max_new_tokens": 2}}, timeout=60
    )
    assert r.status_code == 200 and isinstance(r.json(), list)
    body = {"inputs": "hello", "parameters": {"max_new_tokens": 3}}
    with httpx.stream("POST", f"{lmi_server.url}/generate_stream", json=body, timeout=60) as s:
        raw = b"".join(s.iter_raw())
    parser = SSEParser()
    events = [json.loads(e) for e in parser.feed(raw) + parser.close()]
    assert len(events) == 3 and events[-1]["generated_text"] is not None


def test_lmi_server_with_tgi_compat_answers_tgi_shapes(
    server_pool: ServerPool, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = base_env(tiny_model, tmp_path_factory.mktemp("lmi-compat-work"))
    del env["SM_VLLM_MODEL"]
    env.update(OPTION_MODEL_ID=str(tiny_model), OPTION_MAX_MODEL_LEN="512", OPTION_TGI_COMPAT="true")
    server = server_pool.get("lmi-compat", env)
    r = _post(server, {"inputs": "hello", "parameters": {"max_new_tokens": 3, "details": True}})
    assert r.status_code == 200, r.text
    item = r.json()[0]  # TGI: a list
    assert set(item["details"]["tokens"][0]) == {"id", "text", "logprob", "special"}
    body = {"inputs": "hello", "parameters": {"max_new_tokens": 3}, "stream": True}
    with httpx.stream("POST", f"{server.url}/invocations", json=body, timeout=60) as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        raw = b"".join(s.iter_raw())
    parser = SSEParser()
    events = [json.loads(e) for e in parser.feed(raw) + parser.close()]
    assert len(events) == 3 and "special" in events[0]["token"]


def test_lmi_stream_as_sse_with_output_formatter(
    server_pool: ServerPool, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """OPTION_OUTPUT_FORMATTER=sse: the same LMI stream (tokens with log_prob, generated_text on the
    last one), as `data:` events instead of JSON lines; the default-jsonlines server above is the
    other half. An in-band error (a bad parameter after the 200 is impossible: it is refused first)
    keeps LMI's error shape."""
    env = base_env(tiny_model, tmp_path_factory.mktemp("lmi-sse-work"))
    del env["SM_VLLM_MODEL"]
    env.update(OPTION_MODEL_ID=str(tiny_model), OPTION_MAX_MODEL_LEN="512", OPTION_OUTPUT_FORMATTER="sse")
    server = server_pool.get("lmi-sse", env)
    body = {"inputs": "hello", "parameters": {"max_new_tokens": 4, "details": True}, "stream": True}
    with httpx.stream("POST", f"{server.url}/invocations", json=body, timeout=60) as s:
        assert s.status_code == 200
        assert s.headers["content-type"].startswith("text/event-stream")
        raw = b"".join(s.iter_raw())
    assert raw.startswith(b"data:"), raw[:80]
    parser = SSEParser()
    events = [json.loads(e) for e in parser.feed(raw) + parser.close()]
    assert len(events) == 4 and all(set(e["token"]) == {"id", "text", "log_prob"} for e in events)
    assert events[-1]["generated_text"] == "".join(e["token"]["text"] for e in events)
    assert events[-1]["details"] == {"finish_reason": "length", "generated_tokens": 4, "inputs": "hello"}
    r = _post(server, {"inputs": "hello", "parameters": {"max_new_tokens": "many"}, "stream": True})
    assert r.status_code == 424 and "max_new_tokens" in r.json()["error"]
