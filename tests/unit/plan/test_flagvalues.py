"""The value grammars of vLLM's options (plan/flagvalues.py): counts, types and choices as the packaged
tables record them. Where a grammar mirrors a function vLLM calls (int, float, json.loads), the accepted
and refused texts are the ones that function accepts and refuses."""

from __future__ import annotations

from typing import Any

import pytest

from neuronserve.host import clitables
from neuronserve.plan.flagvalues import GRAMMARS, describe, value_problem

OPTIONS_0_11 = clitables.load("vllm-0.11.0-cli.json")["options"]
OPTIONS_0_13 = clitables.load("vllm-0.13.0-cli.json")["options"]


def opt(type_name: str | None, nargs: Any = None, choices: list[Any] | None = None) -> dict[str, Any]:
    return {"takes_value": True, "nargs": nargs, "choices": choices, "type": type_name}


@pytest.mark.parametrize(
    ("type_name", "good", "bad"),
    [
        ("int", ["7", "-1", "+3", " 8 "], ["eight", "1.5", "1e3", ""]),
        ("float", ["0.9", "1", "1e-3", "-2.5"], ["ninety", "0,9"]),
        ("human_int", ["4096", "32k", "25.6k", "2K", "1m", "1G"], ["32kb", "1.5K", "k", "auto", "4096.0"]),
        ("human_int_or_auto", ["auto", "-1", "8k", "131072"], ["all", "-2k"]),
        ("json", ['{"a": 1}', "[1]", "3", "null"], ["{a: 1}", "{'a': 1}", "yes"]),
        ("json_or_str", ["plain", '{"a": 1}', "[not json"], ["{bad}", "{'a': 1}"]),
        ("bool", ["true", "yes", "anything"], ["0", "no", "off", "NO"]),
        ("int or None", ["5", "None", ""], ["none", "five"]),
        ("str", ["anything at all", ""], []),
    ],
)
def test_each_grammar_accepts_and_refuses(type_name: str, good: list[str], bad: list[str]) -> None:
    for text in good:
        assert value_problem(opt(type_name), [text]) is None, (type_name, text)
    for text in bad:
        problem = value_problem(opt(type_name), [text])
        assert problem == f"takes {describe(type_name)}, not {text!r}", (type_name, text)


def test_int_and_float_grammars_are_what_vllm_calls() -> None:
    """vLLM's type for these is Python's int / float (scripts/vllm_cli_table.py value_type)."""
    assert GRAMMARS["int"][0]("08") == int("08") and GRAMMARS["float"][0]("1e3") == float("1e3")


def test_human_int_values_are_vllms() -> None:
    """vllm 0.11.0 engine/arg_utils.py human_readable_int: 25.6k = 25600, 2K = 2048, 1m = 10**6."""
    parse = GRAMMARS["human_int"][0]
    assert (parse("25.6k"), parse("2K"), parse("1m"), parse("1G")) == (25600, 2048, 10**6, 2**30)


def test_an_unknown_type_is_not_checked_nor_its_choices() -> None:
    """`other`: e.g. 0.24.0's --linear-backend lower-cases its value before comparing the choices."""
    assert value_problem(opt("other", choices=["auto"]), ["AUTO"]) is None


@pytest.mark.parametrize(
    ("nargs", "values", "problem"),
    [
        (None, [], "needs a value"),
        (None, ["a", "b"], "takes one value, given 2: ['a', 'b']"),
        ("+", [], "needs a value"),
        ("+", ["a", "b", "c"], None),
        ("?", [], None),
        ("?", ["a", "b"], "takes values, given 2: ['a', 'b']"),
        ("*", [], None),
        (2, ["a"], "takes 2 values, given 1: ['a']"),
        (2, ["a", "b"], None),
    ],
)
def test_counts_follow_nargs(nargs: Any, values: list[str], problem: str | None) -> None:
    assert value_problem(opt("str", nargs), values) == problem


def test_choices_are_compared_after_the_type() -> None:
    """argparse converts first: `--max-lora-rank 08` is rank 8 for vLLM 0.13.0."""
    rank = OPTIONS_0_13["--max-lora-rank"]
    assert value_problem(rank, ["08"]) is None
    assert value_problem(rank, ["24"]) == "takes one of 1, 8, 16, 32, 64, 128, 256, 320, 512, not '24'"
    assert (
        OPTIONS_0_11["--max-lora-rank"]["choices"] is None
        and value_problem(OPTIONS_0_11["--max-lora-rank"], ["24"]) is None
    )


def test_a_choice_names_the_nearest_one() -> None:
    problem = value_problem(OPTIONS_0_11["--dtype"], ["bfloat"])
    assert problem is not None and problem.endswith("not 'bfloat' (did you mean bfloat16?)")


def test_every_type_in_the_tables_is_known_or_other() -> None:
    """A new name in a regenerated table must be taught here (else its values go unchecked silently)."""
    for name in clitables.table_names():
        for flag, entry in clitables.load(name)["options"].items():
            kind = entry["type"]
            if kind is None:
                assert not entry["takes_value"], (name, flag)
                continue
            assert kind.removesuffix(" or None") in {*GRAMMARS, "other"}, (name, flag, kind)
