"""The exact 422 a client reads for each bad generate parameter, and the edges of every range.

A client that sent a bad value must be told which parameter, which value and what is accepted; the
messages are the front's contract (one error shape, `invalid generate request: ...`). Each row is
the message for one bad input, written out in full, and each range is probed on both sides of its
edge (an open bound refuses the edge itself, a closed one accepts it).
"""

from __future__ import annotations

from typing import Any

import pytest

from neuronserve.front import genparams
from neuronserve.front.errors import FrontError

P = "invalid generate request: parameters."

# (parameters, the exact message)
REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"max_new_tokens": 0}, P + "max_new_tokens must be an integer >= 1, got 0"),
    ({"max_new_tokens": 2.0}, P + "max_new_tokens must be an integer >= 1, got 2.0"),
    ({"max_new_tokens": True}, P + "max_new_tokens must be an integer >= 1, got True"),
    ({"temperature": -0.5}, P + "temperature must be >= 0.0, got -0.5"),
    ({"temperature": "hot"}, P + "temperature must be a number, got 'hot'"),
    ({"temperature": True}, P + "temperature must be a number, got True"),
    ({"temperature": float("inf")}, P + "temperature must be a number, got inf"),
    ({"temperature": float("nan")}, P + "temperature must be a number, got nan"),
    ({"top_p": 0}, P + "top_p must be > 0.0, got 0"),
    ({"top_p": 1.5}, P + "top_p must be <= 1.0, got 1.5"),
    ({"top_k": -2}, P + "top_k must be an integer >= -1, got -2"),
    ({"do_sample": 1}, P + "do_sample must be true or false, got 1"),
    ({"seed": -1}, P + "seed must be an integer >= 0, got -1"),
    ({"repetition_penalty": 0}, P + "repetition_penalty must be > 0.0, got 0"),
    ({"frequency_penalty": -2}, P + "frequency_penalty must be > -2.0, got -2"),
    ({"frequency_penalty": 2.5}, P + "frequency_penalty must be <= 2.0, got 2.5"),
    ({"presence_penalty": -2.0}, P + "presence_penalty must be > -2.0, got -2.0"),
    ({"min_p": -0.1}, P + "min_p must be >= 0.0, got -0.1"),
    ({"min_p": 1.1}, P + "min_p must be <= 1.0, got 1.1"),
    ({"stop": [1]}, P + "stop must be a string or a list of strings"),
    ({"stop": {"a": 1}}, P + "stop must be a string or a list of strings"),
    ({"stop": ["s"] * 17}, P + "stop has 17 entries; at most 16"),
    ({"stop_sequences": 5}, P + "stop_sequences must be a string or a list of strings"),
    ({"stop_token_ids": [1, -1]}, P + "stop_token_ids must be a list of token ids"),
    ({"stop_token_ids": [True]}, P + "stop_token_ids must be a list of token ids"),
    ({"stop_token_ids": 3}, P + "stop_token_ids must be a list of token ids"),
    ({"include_stop_str_in_output": "y"}, P + "include_stop_str_in_output must be true or false, got 'y'"),
    ({"ignore_eos_token": 0}, P + "ignore_eos_token must be true or false, got 0"),
    ({"min_tokens": -1}, P + "min_tokens must be an integer >= 0, got -1"),
    ({"length_penalty": "x"}, P + "length_penalty must be a number, got 'x'"),
    ({"truncate": -1}, P + "truncate must be an integer >= 0, got -1"),
    ({"return_full_text": "no"}, P + "return_full_text must be true or false, got 'no'"),
    ({"top_n_tokens": 21}, P + "top_n_tokens must be an integer >= 0 and <= 20, got 21"),
    ({"logprobs": -1}, P + "logprobs must be an integer >= 0 and <= 20, got -1"),
    ({"prompt_logprobs": 21}, P + "prompt_logprobs must be an integer >= 0 and <= 20, got 21"),
    ({"best_of": 0}, P + "best_of must be an integer >= 1 and <= 8, got 0"),
    ({"n": 9, "do_sample": True}, P + "n must be an integer >= 1 and <= 8, got 9"),
    ({"typical_p": 0.5}, P + "typical_p=0.5 cannot be served: vLLM has no typical decoding"),
    ({"typical_p": 0}, P + "typical_p must be > 0.0, got 0"),
    ({"watermark": True}, P + "watermark=True cannot be served: vLLM 0.11.0 has no watermarking"),
    ({"watermark": "no"}, P + "watermark must be true or false, got 'no'"),
    (
        {"adapter_id": "lora"},
        P + "adapter_id='lora' is not a LoRA adapter this endpoint serves; served adapters: none",
    ),
    ({"num_beams": 4}, P + "num_beams=4 cannot be served: beam search is not served on Neuron"),
    ({"num_beams": 0}, P + "num_beams must be an integer >= 1, got 0"),
    ({"early_stopping": "x"}, P + "early_stopping must be true or false, got 'x'"),
    # grammars
    ({"grammar": "json"}, P + 'grammar must be {"type": "json" | "json_schema" | "regex", "value": ...}'),
    (
        {"grammar": {"type": 1, "value": "x"}},
        P + 'grammar must be {"type": "json" | "json_schema" | "regex", "value": ...}',
    ),
    (
        {"grammar": {"type": "regex"}},
        P + 'grammar must be {"type": "json" | "json_schema" | "regex", "value": ...}',
    ),
    (
        {"grammar": {"type": "regex", "value": ""}},
        P + "grammar: a regex grammar's value must be a non-empty string",
    ),
    (
        {"grammar": {"type": "regex", "value": 3}},
        P + "grammar: a regex grammar's value must be a non-empty string",
    ),
    (
        {"grammar": {"type": "json", "value": "{not json"}},
        P + "grammar: a json grammar's value must be a JSON schema",
    ),
    (
        {"grammar": {"type": "json", "value": "[1]"}},
        P + "grammar: a json grammar's value must be a JSON schema object",
    ),
    (
        {"grammar": {"type": "json", "value": 3}},
        P + "grammar: a json grammar's value must be a JSON schema object",
    ),
    (
        {"grammar": {"type": "ebnf", "value": "x"}},
        P + "grammar.type 'ebnf' is not one of json, json_schema, regex",
    ),
    (
        {"grammar": {"type": "JSON", "value": {}}},
        P + "grammar.type 'JSON' is not one of json, json_schema, regex",
    ),
]


@pytest.mark.parametrize(("params", "message"), REFUSED)
def test_each_bad_parameter_gets_its_exact_message(params: dict[str, Any], message: str) -> None:
    with pytest.raises(FrontError) as err:
        genparams.translate({"inputs": "x", "parameters": params}, "x", "m")
    assert err.value.status == 422
    assert err.value.message == message


def test_a_json_schema_wrapper_without_an_object_schema_is_the_schema() -> None:
    """TGI 3.x wraps the schema as {"name", "schema"}; a wrapper whose schema is no object stays whole."""
    value = {"name": "x", "schema": "s"}
    req = genparams.translate(
        {"inputs": "x", "parameters": {"grammar": {"type": "json_schema", "value": value}}}, "x", None
    )
    assert req.engine["structured_outputs"] == {"json": value}
    req = genparams.translate(
        {"inputs": "x", "parameters": {"grammar": {"type": "json_schema", "value": '{"type": "string"}'}}},
        "x",
        None,
    )
    assert req.engine["structured_outputs"] == {"json": {"type": "string"}}


# (parameter, value at or just inside an edge, the engine field it sets or None when it sets nothing)
ACCEPTED: list[tuple[str, Any, str | None, Any]] = [
    ("max_new_tokens", 1, "max_tokens", 1),
    ("temperature", 0, "temperature", 0.0),  # greedy anyway: temperature 0.0
    ("top_p", 1.0, "top_p", 1.0),
    ("top_p", 1e-9, "top_p", 1e-9),
    ("frequency_penalty", 2.0, "frequency_penalty", 2.0),
    ("frequency_penalty", -1.99, "frequency_penalty", -1.99),
    ("presence_penalty", 2, "presence_penalty", 2.0),
    ("repetition_penalty", 1e-6, "repetition_penalty", 1e-6),
    ("min_p", 0, "min_p", 0.0),
    ("min_p", 1, "min_p", 1.0),
    ("min_tokens", 0, "min_tokens", 0),
    ("top_k", 1, "top_k", 1),  # the smallest k that limits sampling
    ("seed", 0, "seed", 0),
    ("truncate", 1, "truncate_prompt_tokens", 1),
    ("top_n_tokens", 20, "logprobs", 20),
    ("logprobs", 20, "logprobs", 20),
    ("prompt_logprobs", 20, "prompt_logprobs", 20),
    ("prompt_logprobs", 0, "prompt_logprobs", 0),
    ("stop_token_ids", [], "stop_token_ids", []),
    ("stop_token_ids", [0], "stop_token_ids", [0]),
    ("length_penalty", -3, "length_penalty", -3.0),
    ("typical_p", 1, None, None),
    ("num_beams", 1, None, None),
    ("early_stopping", False, None, None),
    ("adapter_id", "", None, None),
]


@pytest.mark.parametrize(("name", "value", "field", "want"), ACCEPTED)
def test_range_edges_are_accepted(name: str, value: Any, field: str | None, want: Any) -> None:
    params = {name: value}
    req = genparams.translate({"inputs": "x", "parameters": params}, "x", None)
    if field is None:
        assert req.engine == genparams.translate({"inputs": "x"}, "x", None).engine
    else:
        assert req.engine[field] == want
        assert type(req.engine[field]) is type(want)


def test_sixteen_stop_sequences_are_accepted_and_empty_ones_and_repeats_dropped() -> None:
    stops = [f"s{i}" for i in range(16)]
    req = genparams.translate({"inputs": "x", "parameters": {"stop": stops}}, "x", None)
    assert req.engine["stop"] == stops == req.stop
    req = genparams.translate(
        {"inputs": "x", "parameters": {"stop": ["a", "", "b", "a"], "stop_sequences": "c"}}, "x", None
    )
    assert req.engine["stop"] == ["a", "b", "c"]
    assert req.stop == ["a", "b", "c"]


def test_best_of_and_n_take_the_larger_and_need_sampling_and_no_stream() -> None:
    req = genparams.translate(
        {"inputs": "x", "parameters": {"best_of": 3, "n": 2, "do_sample": True}}, "x", None
    )
    assert req.n == 3 and req.engine["n"] == 3
    req = genparams.translate(
        {"inputs": "x", "parameters": {"n": 2, "best_of": 8, "do_sample": True}}, "x", None
    )
    assert req.n == 8 and req.engine["n"] == 8
    # a sampling knob is enough to sample
    req = genparams.translate({"inputs": "x", "parameters": {"n": 2, "temperature": 0.7}}, "x", None)
    assert req.engine == {
        "prompt": "x",
        "max_tokens": 20,
        "temperature": 0.7,
        "n": 2,
        "logprobs": 1,
        "return_token_ids": True,
    }
    req = genparams.translate({"inputs": "x", "parameters": {"n": 2, "top_k": 3}}, "x", None)
    assert req.engine["top_k"] == 3 and req.engine["n"] == 2 and "temperature" not in req.engine
    with pytest.raises(FrontError) as err:
        genparams.translate(
            {"inputs": "x", "stream": True, "parameters": {"n": 2, "do_sample": True}}, "x", None
        )
    assert err.value.message == "invalid generate request: best_of/n > 1 cannot be streamed"
    with pytest.raises(FrontError) as err:
        genparams.translate({"inputs": "x", "parameters": {"best_of": 2}}, "x", None)
    assert err.value.message == (
        "invalid generate request: best_of/n > 1 needs sampling (do_sample: true), "
        "else every sequence is the same"
    )
    with pytest.raises(FrontError):  # do_sample false wins over a knob
        genparams.translate(
            {"inputs": "x", "parameters": {"n": 2, "temperature": 0.7, "do_sample": False}}, "x", None
        )


def test_greedy_drops_every_sampling_knob() -> None:
    req = genparams.translate(
        {"inputs": "x", "parameters": {"temperature": 0.7, "top_p": 0.5, "top_k": 4, "do_sample": False}},
        "x",
        None,
    )
    assert req.engine == {"prompt": "x", "max_tokens": 20, "temperature": 0.0, "return_token_ids": True}
    # top_k 0 is "all tokens": not a sampling knob, so still greedy
    req = genparams.translate({"inputs": "x", "parameters": {"top_k": 0, "top_p": 0.5}}, "x", None)
    assert req.engine == {"prompt": "x", "max_tokens": 20, "top_p": 0.5, "return_token_ids": True}


def test_logprobs_details_and_prefill_combine() -> None:
    req = genparams.translate(
        {"inputs": "x", "parameters": {"top_n_tokens": 2, "logprobs": 5, "details": True}}, "x", None
    )
    assert req.engine["logprobs"] == 5 and req.top_n == 2 and req.details
    req = genparams.translate({"inputs": "x", "parameters": {"top_n_tokens": 4, "logprobs": 1}}, "x", None)
    assert req.engine["logprobs"] == 4
    req = genparams.translate({"inputs": "x", "parameters": {"logprobs": 0, "details": False}}, "x", None)
    assert "logprobs" not in req.engine and req.top_n == 0 and not req.details
    req = genparams.translate({"inputs": "x", "parameters": {"decoder_input_details": False}}, "x", None)
    assert "prompt_logprobs" not in req.engine and not req.decoder_details
    req = genparams.translate(
        {"inputs": "x", "parameters": {"decoder_input_details": True, "prompt_logprobs": 3}}, "x", None
    )
    assert req.engine["prompt_logprobs"] == 3 and req.decoder_details


def test_stream_fields_model_seed_and_front_fields() -> None:
    req = genparams.translate({"inputs": "x", "stream": True, "parameters": {"seed": 5}}, "p", "llama")
    assert req.engine == {
        "prompt": "p",
        "max_tokens": 20,
        "temperature": 0.0,
        "seed": 5,
        "model": "llama",
        "return_token_ids": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert (req.prompt, req.stream, req.seed, req.n, req.full_text, req.decoder_details) == (
        "p",
        True,
        5,
        1,
        False,
        False,
    )
    req = genparams.translate({"inputs": "x", "stream": None, "parameters": None}, "p", "")
    assert (
        req.stream is False and "stream" not in req.engine and "model" not in req.engine and req.seed is None
    )
    assert req.stop == [] and req.top_n == 0 and req.details is False


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"parameters": [1]}, "invalid generate request: 'parameters' must be an object"),
        ({"stream": "yes"}, "invalid generate request: 'stream' must be true or false"),
        ({"stream": 1}, "invalid generate request: 'stream' must be true or false"),
    ],
)
def test_body_level_messages(body: dict[str, Any], message: str) -> None:
    with pytest.raises(FrontError) as err:
        genparams.translate({"inputs": "x", **body}, "x", None)
    assert err.value.message == message


def test_unknown_parameters_are_named_sorted_and_capped_at_ten() -> None:
    names = [f"z{i:02d}" for i in range(12)]
    with pytest.raises(FrontError) as err:
        genparams.translate({"inputs": "x", "parameters": {n: 1 for n in reversed(names)}}, "x", None)
    msg = err.value.message
    assert msg.startswith(
        f"invalid generate request: unknown parameters {names[:10]}; accepted: max_new_tokens, "
    )
    assert msg.endswith(", num_beams, early_stopping")
    assert msg.split("accepted: ")[1].split(", ") == list(genparams.PARAMETERS)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (["a"] * 33, "invalid generate request: 'inputs' has 33 prompts; at most 32 in one request"),
        (
            None,
            "invalid generate request: 'inputs' must be a string or a non-empty list of strings, "
            "got NoneType",
        ),
        ([], "invalid generate request: 'inputs' must be a string or a non-empty list of strings, got list"),
        (3, "invalid generate request: 'inputs' must be a string or a non-empty list of strings, got int"),
    ],
)
def test_inputs_messages(inputs: Any, message: str) -> None:
    with pytest.raises(FrontError) as err:
        genparams.check_inputs({"inputs": inputs})
    assert err.value.status == 422
    assert err.value.message == message


def test_thirty_two_prompts_are_one_batch() -> None:
    assert genparams.check_inputs({"inputs": ["a"] * 32}) == ["a"] * 32
