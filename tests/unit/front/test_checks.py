"""The generate parameters' value checks (front/checks.py): each returns the value the engine gets, or an
`Invalid` naming the parameter, its bound and the value sent, cut short when it is long."""

from __future__ import annotations

import math
from typing import Any

import pytest

from neuronserve.front import checks
from neuronserve.front.errors import Invalid


def _refusal(call: Any, *args: Any) -> str:
    with pytest.raises(Invalid) as err:
        call(*args)
    text = str(err.value)
    assert text.startswith("invalid generate request: ")
    return text


def test_number_accepts_ints_and_floats_within_the_bounds() -> None:
    assert checks.number("temperature", 1, 0.0, 2.0) == 1.0
    assert checks.number("top_p", 0.5, 0.0, 1.0, lo_open=True) == 0.5
    assert checks.number("top_p", 1.0, 0.0, 1.0, lo_open=True) == 1.0  # the upper bound is closed
    assert checks.number("repetition_penalty", 0.0, 0.0) == 0.0  # the lower bound closed unless lo_open
    assert isinstance(checks.number("x", 3), float)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (True, "must be a number, got True"),
        ("1.0", "must be a number, got '1.0'"),
        (None, "must be a number, got None"),
        (math.nan, "must be a number, got nan"),
        (math.inf, "must be a number, got inf"),
        (10**400, "must be a number, got 1000"),  # no OverflowError: a number too big for a float
    ],
)
def test_number_refuses_what_is_not_a_finite_number(value: Any, needle: str) -> None:
    assert needle in _refusal(checks.number, "temperature", value, 0.0)


def test_number_bounds_name_the_side_and_the_value() -> None:
    assert "parameters.top_p must be > 0.0, got 0.0" in _refusal(checks.number, "top_p", 0.0, 0.0, 1.0, True)
    assert "parameters.t must be >= 0.0, got -0.5" in _refusal(checks.number, "t", -0.5, 0.0)
    assert "parameters.t must be <= 2.0, got 2.5" in _refusal(checks.number, "t", 2.5, 0.0, 2.0)


def test_a_long_value_is_cut_in_the_message() -> None:
    text = _refusal(checks.number, "t", "9" * 4000, 0.0)
    assert text.endswith("...") and len(text) < 200


def test_integer_bounds_and_types() -> None:
    assert checks.integer("max_new_tokens", 5, 1) == 5
    assert checks.integer("top_k", 10, 1, 10) == 10
    assert "must be an integer >= 1, got 0" in _refusal(checks.integer, "max_new_tokens", 0, 1)
    assert "must be an integer >= 1 and <= 10, got 11" in _refusal(checks.integer, "top_k", 11, 1, 10)
    assert "got 2.0" in _refusal(checks.integer, "top_k", 2.0, 1)
    assert "got True" in _refusal(checks.integer, "top_k", True, 0)


def test_boolean_takes_only_json_booleans() -> None:
    assert checks.boolean("details", False) is False
    assert "parameters.details must be true or false, got 1" in _refusal(checks.boolean, "details", 1)
    assert "got 'true'" in _refusal(checks.boolean, "details", "true")


def test_strings_take_one_or_a_list_and_drop_empty_ones() -> None:
    assert checks.strings("stop", "##", 4) == ["##"]
    assert checks.strings("stop", ["a", "", "b"], 4) == ["a", "b"]
    assert checks.strings("stop", [], 4) == []
    assert "has 5 entries; at most 4" in _refusal(checks.strings, "stop", ["a"] * 5, 4)
    assert "must be a string or a list of strings" in _refusal(checks.strings, "stop", ["a", 1], 4)
    assert "must be a string or a list of strings" in _refusal(checks.strings, "stop", {"a": 1}, 4)


def test_token_ids_are_non_negative_ints() -> None:
    assert checks.token_ids("ids", [0, 5]) == [0, 5]
    for bad in ([-1], [1.0], [True], "1,2", None):
        assert "parameters.ids must be a list of token ids" in _refusal(checks.token_ids, "ids", bad)


@pytest.mark.parametrize(
    ("grammar", "want"),
    [
        ({"type": "regex", "value": "[0-9]+"}, {"regex": "[0-9]+"}),
        ({"type": "json", "value": {"type": "object"}}, {"json": {"type": "object"}}),
        ({"type": "json", "value": '{"type": "string"}'}, {"json": {"type": "string"}}),
        (
            {"type": "json_schema", "value": {"name": "x", "schema": {"type": "array"}}},
            {"json": {"type": "array"}},
        ),
        ({"type": "json_schema", "value": {"type": "object"}}, {"json": {"type": "object"}}),
    ],
)
def test_grammar_becomes_vllm_structured_outputs(grammar: dict[str, Any], want: dict[str, Any]) -> None:
    assert checks.grammar(grammar) == want


@pytest.mark.parametrize(
    ("grammar", "needle"),
    [
        ("regex", 'parameters.grammar must be {"type"'),
        ({"type": "regex"}, 'parameters.grammar must be {"type"'),
        ({"type": 1, "value": "x"}, 'parameters.grammar must be {"type"'),
        ({"type": "regex", "value": ""}, "a regex grammar's value must be a non-empty string"),
        ({"type": "json", "value": "not json"}, "a json grammar's value must be a JSON schema"),
        ({"type": "json", "value": "[1]"}, "must be a JSON schema object"),
        ({"type": "json", "value": "[" * 200 + "]" * 200}, "nested too deeply"),
        (
            {"type": "yaml", "value": "x"},
            "parameters.grammar.type 'yaml' is not one of json, json_schema, regex",
        ),
    ],
)
def test_grammar_refusals_say_what_is_expected(grammar: Any, needle: str) -> None:
    assert needle in _refusal(checks.grammar, grammar)


def test_adapters() -> None:
    assert checks.adapter_name("adapter_id", "fr") == "fr"
    assert "must be a string (a LoRA adapter's name), got 3" in _refusal(checks.adapter_name, "adapter_id", 3)
    assert checks.served_adapter("fr", ("de", "fr")) == "fr"
    assert "served adapters: de, fr" in _refusal(checks.served_adapter, "es", ("de", "fr"))
    assert "served adapters: none" in _refusal(checks.served_adapter, "es", ())
