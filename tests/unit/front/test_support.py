"""front/support.py: what a request needs, both ways (each needing field is found, its neutral
neighbour is not), and the refusals against a RequestSupport as a Neuron plan produces it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.unit.front.test_genparams import TGI_CLIENT_DEFAULTS

from neuronserve.front.errors import FrontError
from neuronserve.front.support import check_generate, check_openai, generate_needs, openai_needs
from neuronserve.types import CAPABILITIES, RequestSupport

FIELDS = Path(__file__).resolve().parents[3] / "tests" / "data" / "vllm-0.11.0-request-fields.json"

WHY = {
    "logprobs": "on-device sampling returns no logprobs; set SM_NEURON_ON_DEVICE_SAMPLING=false",
    "prompt_logprobs": "vllm-neuron 0.2.2+lts never returns prompt logprobs",
    "penalties": "on-device sampling applies only temperature, top_k and top_p",
    "structured_outputs": "vllm-neuron 0.2.2+lts never applies the grammar bitmask",
}
NEURON = RequestSupport(
    logprobs=False, prompt_logprobs=False, penalties=False, structured_outputs=False, why=WHY
)
LORA = RequestSupport(lora_adapters=("a", "b"), adapter_required=True)
SCHEMA = {"name": "x", "schema": {"type": "object"}}
TEXT = {"type": "text"}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}

# (field, value that needs the capability, its neutral neighbour (None: absent), capability)
OPENAI_ROWS: list[tuple[str, Any, Any, str]] = [
    ("presence_penalty", 0.5, 0, "penalties"),
    ("presence_penalty", -0.5, 0.0, "penalties"),
    ("frequency_penalty", 1.0, 0, "penalties"),
    ("repetition_penalty", 1.2, 1.0, "penalties"),
    ("repetition_penalty", 0.9, 1, "penalties"),
    ("min_p", 0.05, 0, "penalties"),
    ("logprobs", True, False, "logprobs"),  # chat
    ("logprobs", 3, None, "logprobs"),
    ("top_logprobs", 2, 0, "logprobs"),
    ("best_of", 2, 1, "logprobs"),
    ("use_beam_search", True, False, "logprobs"),
    ("prompt_logprobs", 0, None, "prompt_logprobs"),
    ("prompt_logprobs", 5, None, "prompt_logprobs"),
    ("response_format", {"type": "json_schema", "json_schema": SCHEMA}, TEXT, "structured_outputs"),
    ("response_format", {"type": "json_object"}, TEXT, "structured_outputs"),
    ("structured_outputs", {"regex": "[ab]+"}, {"disable_any_whitespace": True}, "structured_outputs"),
    ("structured_outputs", {"choice": ["x", "y"]}, {}, "structured_outputs"),
    ("guided_json", {"type": "object"}, None, "structured_outputs"),
    ("guided_regex", "[ab]+", None, "structured_outputs"),
    ("guided_choice", ["x"], None, "structured_outputs"),
    ("guided_grammar", "root ::= 'a'", None, "structured_outputs"),
    ("tool_choice", "required", "auto", "structured_outputs"),
    ("tool_choice", {"type": "function", "function": {"name": "f"}}, "none", "structured_outputs"),
]  # fmt: skip

GENERATE_ROWS: list[tuple[str, Any, Any, str]] = [
    ("repetition_penalty", 1.3, 1.0, "penalties"),
    ("frequency_penalty", 0.4, 0.0, "penalties"),
    ("presence_penalty", 0.4, 0, "penalties"),
    ("min_p", 0.1, 0.0, "penalties"),
    ("top_n_tokens", 3, 0, "logprobs"),
    ("logprobs", 2, 0, "logprobs"),  # LMI
    ("best_of", 2, 1, "logprobs"),  # the front ranks the sequences by their logprobs
    ("n", 3, 1, "logprobs"),
    ("decoder_input_details", True, False, "prompt_logprobs"),
    ("prompt_logprobs", 0, None, "prompt_logprobs"),
    ("grammar", {"type": "regex", "value": "[ab]+"}, None, "structured_outputs"),
]


def _with(field: str, value: Any, base: dict[str, Any]) -> dict[str, Any]:
    return base if value is None else {**base, field: value}


@pytest.mark.parametrize(("field", "needing", "neutral", "capability"), OPENAI_ROWS)
def test_openai_field_needs_its_capability_and_its_neutral_neighbour_does_not(
    field: str, needing: Any, neutral: Any, capability: str
) -> None:
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [TOOL]}
    needs = openai_needs(_with(field, needing, base))
    assert [n.capability for n in needs] == [capability]
    assert needs[0].field in (field, f"{field}.type")  # response_format.type: the schema stays out
    assert openai_needs(_with(field, neutral, base)) == []
    with pytest.raises(FrontError) as err:
        check_openai(_with(field, needing, base), NEURON)
    assert err.value.status == 400
    assert err.value.message.startswith(f"{needs[0].field}=") and err.value.message.endswith(WHY[capability])
    assert check_openai(_with(field, neutral, base), NEURON) is False


@pytest.mark.parametrize(("field", "needing", "neutral", "capability"), GENERATE_ROWS)
def test_generate_parameter_needs_its_capability_and_its_neutral_neighbour_does_not(
    field: str, needing: Any, neutral: Any, capability: str
) -> None:
    base = {"max_new_tokens": 5, "details": True, "do_sample": True}
    needs = generate_needs(_with(field, needing, base))
    assert [(n.capability, n.field) for n in needs] == [(capability, f"parameters.{field}")]
    assert generate_needs(_with(field, neutral, base)) == []
    with pytest.raises(FrontError) as err:
        check_generate(_with(field, needing, base), NEURON)
    assert err.value.status == 422
    assert f"parameters.{field}=" in err.value.message and err.value.message.endswith(WHY[capability])
    check_generate(_with(field, neutral, base), NEURON)


def test_the_defaults_every_client_sends_pass_on_neuron() -> None:
    """What openai, text_generation and LMI clients send when nothing is asked for."""
    chat = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "presence_penalty": 0,
        "frequency_penalty": 0,
        "logprobs": False,
        "top_logprobs": 0,
        "n": 1,
        "tool_choice": "none",
        "response_format": {"type": "text"},
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 50,
    }
    assert openai_needs(chat) == []
    tgi_client = {**TGI_CLIENT_DEFAULTS, "details": True}
    assert generate_needs(tgi_client) == []
    check_generate(tgi_client, NEURON)


def test_completions_logprobs_0_asks_for_logprobs_and_chat_logprobs_0_does_not() -> None:
    assert [n.field for n in openai_needs({"prompt": "x", "logprobs": 0})] == ["logprobs"]
    assert openai_needs({"messages": [], "logprobs": 0}) == []
    assert [n.field for n in openai_needs({"messages": [], "logprobs": 1})] == ["logprobs"]


def test_cpu_support_allows_everything() -> None:
    """RequestSupport() (the CPU device) refuses nothing and requires no adapter."""
    body = {key: needing for key, needing, _, _ in OPENAI_ROWS}
    assert len({n.capability for n in openai_needs(body)}) == len(CAPABILITIES)
    assert check_openai(body, RequestSupport()) is False
    params = {key: needing for key, needing, _, _ in GENERATE_ROWS}
    check_generate(params, RequestSupport())


def test_a_capability_without_a_sentence_still_says_what_is_missing() -> None:
    with pytest.raises(FrontError) as err:
        check_openai({"min_p": 0.2}, RequestSupport(penalties=False))
    assert (
        err.value.message
        == "min_p=0.2 cannot be served by this endpoint: the planned engine does not serve penalties"
    )


def test_openai_model_naming_a_served_adapter_is_kept() -> None:
    assert check_openai({"model": "b", "prompt": "x"}, LORA) is True
    assert check_openai({"model": "m", "prompt": "x"}, RequestSupport(lora_adapters=("a",))) is False


@pytest.mark.parametrize("model", ["base-model", None, ""])
def test_openai_request_naming_no_adapter_is_refused_where_one_is_required(model: str | None) -> None:
    with pytest.raises(FrontError) as err:
        check_openai({"model": model, "prompt": "x"}, LORA)
    assert err.value.status == 400
    assert f"model={model!r}" in err.value.message and "served adapters: a, b" in err.value.message


@pytest.mark.parametrize("adapter", [None, ""])
def test_generate_request_naming_no_adapter_is_refused_where_one_is_required(adapter: str | None) -> None:
    with pytest.raises(FrontError) as err:
        check_generate({"adapter_id": adapter}, LORA)
    assert err.value.status == 422 and "served adapters: a, b" in err.value.message
    check_generate({"adapter_id": "a"}, LORA)


def test_the_fields_read_are_vllm_0_11_request_fields() -> None:
    """Every OpenAI field read here is one vLLM 0.11.0 declares (or /v1/responses' `text`)."""
    models = json.loads(FIELDS.read_text())["models"]
    declared = {f["name"] for m in ("ChatCompletionRequest", "CompletionRequest") for f in models[m]}
    read = {row[0] for row in OPENAI_ROWS}
    assert read <= declared, read - declared
    structured = {f["name"] for f in models["StructuredOutputsParams"]}
    assert {"json", "regex", "choice", "grammar", "json_object", "structural_tag"} <= structured
