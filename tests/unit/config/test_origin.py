"""config/origin.py: values from two sources are compared in one canonical form (numbers by value,
true/false/max in any case), and a real disagreement is refused naming both variables."""

from __future__ import annotations

from typing import Any

import pytest

from neuronserve.config.origin import Collector, Setting, canon, show
from neuronserve.errors import ConfigError


@pytest.mark.parametrize(
    ("value", "form"),
    [
        ("08", 8),
        (" 8 ", 8),
        ("-4", -4),
        ("--4", "--4"),
        ("- 4", "- 4"),
        ("²", "²"),
        ("1_0", "1_0"),
        ("TRUE", "true"),
        ("Max", "max"),
        ("bfloat16", "bfloat16"),
        (True, True),
        (["a"], ["a"]),
    ],
)
def test_the_canonical_form(value: Any, form: Any) -> None:
    assert canon(value) == form


def test_equal_values_from_two_sources_are_one_setting_kept_from_the_first() -> None:
    c = Collector()
    c.add("max-num-seqs", "08", "SM_VLLM_MAX_NUM_SEQS")
    c.add("max-num-seqs", "8", "-- --max-num-seqs")
    c.add("trust-remote-code", "true", "OPTION_TRUST_REMOTE_CODE")
    c.add("trust-remote-code", "TRUE", "HF_MODEL_TRUST_REMOTE_CODE")
    assert c.values == {
        "max-num-seqs": Setting("08", "SM_VLLM_MAX_NUM_SEQS"),
        "trust-remote-code": Setting("true", "OPTION_TRUST_REMOTE_CODE"),
    }


def test_a_disagreement_names_both_variables_and_both_values() -> None:
    c = Collector()
    c.add("dtype", "bfloat16", "SM_VLLM_DTYPE")
    with pytest.raises(ConfigError) as err:
        c.add("dtype", {"a": 1}, "SM_NEURON_OVERRIDE_CONFIG")
    assert str(err.value) == (
        'SM_VLLM_DTYPE=bfloat16 and SM_NEURON_OVERRIDE_CONFIG={"a": 1} both set dtype with different values: '
        "remove one of them or make them equal"
    )
    assert err.value.variables == ("SM_VLLM_DTYPE", "SM_NEURON_OVERRIDE_CONFIG")


def test_show_writes_text_as_is_and_anything_else_as_json() -> None:
    assert show("text") == "text"
    assert show(False) == "false"
    assert show([1, "a"]) == '[1, "a"]'
