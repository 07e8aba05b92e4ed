"""config/values.py: each parser a row names, with the message it refuses a value with (word for word:
the message names the variable and is what a user reads), and the typed default an unset row takes."""

from __future__ import annotations

from typing import Any

import pytest

from neuronserve.config import values as p
from neuronserve.config.var import Var
from neuronserve.errors import ConfigError

SWITCH = "is a switch (vLLM's -- takes no value): use true or false"


def row(parse: p.Parser, default: Any = None) -> Var:
    return Var("X_VAR", "", default, "", "", parse)


@pytest.mark.parametrize(
    ("parse", "default", "raw", "value"),
    [
        (p.text, None, " a b ", "a b"),
        (p.number, None, " 2.5 ", 2.5),
        (p.number, None, "0", 0.0),
        (p.number_or_default, 6.0, "0", 6.0),
        (p.number_or_default, 6.0, "12", 12.0),
        (p.whole_number, None, " 8080 ", 8080),
        (p.whole_number, None, "0", 0),
        (p.port, 8080, "65535", 65535),
        (p.listen_port, 8080, "0", 0),
        (p.whole_between(1, 128), None, "128", 128),
        (p.number, None, "1e3", 1000.0),
        (p.boolean, False, "TRUE", True),
        (p.boolean, False, "1", True),
        (p.boolean, False, "0", False),
        (p.at_least_one, None, " 3 ", 3),
        (p.niceness, 10, "19", 19),
        (p.niceness, 10, "0", 0),
        (p.seconds_above_zero, 1200.0, "0.5", 0.5),
        (p.gib_above_zero, None, "16", 16.0),
        (p.choice("a", "b"), None, " B ", "b"),
        (p.lmi_bool, None, "", True),
        (p.lmi_bool, None, "False", False),
        (p.lmi_dtype, None, "BF16", "bfloat16"),
        (p.lmi_dtype, None, "float32", "float32"),
        (p.lmi_count, None, " 0042 ", "0042"),
        (p.lmi_cores, None, "MAX", "max"),
        (p.json_object, None, '{"a": 1}', {"a": 1}),
        (p.override_value, None, "False", False),
        (p.override_value, None, "null", None),
        (p.override_value, None, "[1, 2]", [1, 2]),
        (p.override_value, None, "text", "text"),
        (p.sm_vllm, None, "", True),
        (p.sm_vllm, None, "FALSE", False),
        (p.sm_vllm, None, '{"b": 1, "a": 2}', '{"a": 2, "b": 1}'),
        (p.sm_vllm_switch, None, "", True),
        (p.sm_vllm_switch, None, " True ", True),
        (p.sm_vllm_switch, None, "false", False),
    ],
)
def test_parsers_type_the_text(parse: p.Parser, default: Any, raw: str, value: Any) -> None:
    assert parse(row(parse, default), raw) == value


@pytest.mark.parametrize(
    ("parse", "default", "raw", "message"),
    [
        (p.number, None, " ten ", "X_VAR='ten' is not a number"),
        (p.number, None, "-1", "X_VAR='-1' must not be negative"),
        (p.number, None, "nan", "X_VAR='nan' is not a number"),
        (p.number, None, "inf", "X_VAR='inf' is not a number"),
        (p.number, None, "1e999", "X_VAR='1e999' is not a number"),
        (p.number, None, "1_0", "X_VAR='1_0' is not a number"),
        (p.number, None, "٣", "X_VAR='٣' is not a number"),
        (p.whole_number, 8080, "8080.9", "X_VAR='8080.9' must be a whole number (digits only, e.g. 8080)"),
        (p.whole_number, 8080, "1e3", "X_VAR='1e3' must be a whole number (digits only, e.g. 8080)"),
        (p.whole_number, 8080, "nan", "X_VAR='nan' is not a number"),
        (p.whole_number, 8080, "-inf", "X_VAR='-inf' is not a number"),
        (p.whole_number, 8080, "1_0", "X_VAR='1_0' is not a number"),
        (p.whole_number, 8080, "-1", "X_VAR='-1' must not be negative"),
        (p.whole_number, 8080, "+8", "X_VAR='+8' must be a whole number (digits only, e.g. 8080)"),
        (p.port, 8080, "0", "X_VAR=0 is out of range: use a whole number from 1 to 65535"),
        (p.port, 8080, "65536", "X_VAR=65536 is out of range: use a whole number from 1 to 65535"),
        (p.listen_port, 8080, "65536", "X_VAR=65536 is out of range: use a whole number from 0 to 65535"),
        (
            p.port,
            8080,
            "99999999999999999999",
            "X_VAR=99999999999999999999 is out of range: use a whole number from 1 to 65535",
        ),
        (p.whole_between(1, 128), None, "-3", "X_VAR='-3' must not be negative"),
        (p.whole_between(1, 128), None, "129", "X_VAR=129 is out of range: use a whole number from 1 to 128"),
        (p.niceness, 10, "nan", "X_VAR='nan' is not a number"),
        (p.seconds_above_zero, 1200.0, "inf", "X_VAR='inf' is not a number"),
        (p.boolean, False, " Maybe ", "X_VAR='maybe' is not a boolean: use true or false"),
        (p.at_least_one, None, "0", "X_VAR='0' must be a whole number >= 1"),
        (p.at_least_one, None, "²", "X_VAR='²' must be a whole number >= 1"),
        (p.niceness, 10, " 20", "X_VAR=' 20' must be a whole number from 0 to 19"),
        (p.niceness, 10, "1.5", "X_VAR='1.5' must be a whole number from 0 to 19"),
        (p.seconds_above_zero, 1200.0, "0", "X_VAR must be a positive number of seconds (default 1200)"),
        (p.gib_above_zero, None, "0", "X_VAR must be above 0 (e.g. 16)"),
        (p.choice("a", "b"), None, "C", "X_VAR='c' is not one of: a, b"),
        (p.lmi_bool, None, "yes", "X_VAR='yes' is not a boolean: use true or false"),
        (p.lmi_count, None, "²", "X_VAR='²' is not a positive integer"),
        (p.lmi_cores, None, "all", "X_VAR='all' is not a positive integer or max"),
        (p.json_object, None, "[1]", "X_VAR must be a JSON object, e.g. '{\"enable_bucketing\": false}'"),
        (p.sm_vllm_switch, None, " 1 ", "X_VAR='1' " + SWITCH),
        (p.sm_vllm_switch, None, "maybe", "X_VAR='maybe' " + SWITCH),
    ],
)
def test_parsers_refuse_naming_the_variable(parse: p.Parser, default: Any, raw: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse(row(parse, default), raw)
    assert str(err.value) == message and err.value.variables == ("X_VAR",)


@pytest.mark.parametrize("raw", [None, "", "  "])
def test_an_unset_or_blank_variable_takes_the_typed_default_unparsed(raw: str | None) -> None:
    var = Var("X_VAR", "", 8080, "", "", p.whole_number)
    assert var.read({} if raw is None else {"X_VAR": raw}) == 8080


def test_a_choice_takes_one_of_its_values_in_any_case_and_names_them_all_otherwise() -> None:
    parse = p.choice("auto", "neuron", "cpu")  # built here: a parser built at import is fixed by then
    assert parse(row(parse), " NEURON ") == "neuron"
    with pytest.raises(ConfigError) as err:
        parse(row(parse), "Gpu")
    assert str(err.value) == "X_VAR='gpu' is not one of: auto, neuron, cpu"
    assert err.value.variables == ("X_VAR",)


@pytest.mark.parametrize(
    "parse", [p.number_or_default, p.whole_number, p.niceness, p.seconds_above_zero, p.gib_above_zero]
)
def test_every_number_parser_refuses_text_naming_the_variable(parse: p.Parser) -> None:
    with pytest.raises(ConfigError) as err:
        parse(row(parse, 1.0), "lots")
    assert str(err.value) == "X_VAR='lots' is not a number" and err.value.variables == ("X_VAR",)


@pytest.mark.parametrize(
    ("parse", "raw", "value"), [(p.gib_above_zero, "0.5", 0.5), (p.gib_above_zero, "1", 1.0)]
)
def test_a_size_above_zero_may_be_below_one(parse: p.Parser, raw: str, value: float) -> None:
    assert parse(row(parse), raw) == value


def test_a_long_value_is_quoted_cut_short() -> None:
    """A 100 KB value is named by its start and its length, not echoed whole onto the terminal."""
    with pytest.raises(ConfigError) as err:
        p.number(row(p.number), "x" * 100_000)
    assert str(err.value) == f"X_VAR={'x' * 80!r}... (100000 characters) is not a number"


def test_more_digits_than_int_converts_is_refused_not_a_traceback() -> None:
    """int() refuses more than 4300 digits with a ValueError; a count that long is just not a count."""
    with pytest.raises(ConfigError) as err:
        p.at_least_one(row(p.at_least_one), "9" * 5000)
    assert err.value.variables == ("X_VAR",)
    with pytest.raises(ConfigError):
        p.lmi_count(row(p.lmi_count), "9" * 5000)
