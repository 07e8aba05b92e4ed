"""config/settings.py cases that mutation testing showed unchecked (issue #16, docs/TESTING.md): how two
sources' values are compared (numbers by value, negative ones too; true/false in any case), the
SM_VLLM_* variables that are not engine flags, and serving.properties reaching the front's dialect."""

from __future__ import annotations

import pytest
from tests.unit.test_plan_settings import cpu_plan

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError


@pytest.mark.parametrize(("env_value", "arg_value"), [("-01", "-1"), ("-0", "0"), ("0042", "42")])
def test_numbers_from_two_sources_agree_by_value_negative_ones_too(env_value: str, arg_value: str) -> None:
    """`-- --max-model-len -1` and SM_VLLM_MAX_MODEL_LEN=-01 say the same number: one setting, not a
    conflict (a negative number is compared as a number like a positive one); `--` wins as the origin."""
    s = parse_settings(
        {"SM_VLLM_MODEL": "m", "SM_VLLM_MAX_MODEL_LEN": env_value}, extra_args=("--max-model-len", arg_value)
    )
    setting = s.engine["max-model-len"]
    assert (setting.value, setting.origin) == (arg_value, "-- --max-model-len")


def test_a_dash_dash_value_in_two_sources_is_compared_not_crashed_on() -> None:
    """ "--4" is no number ("--4".lstrip("-") is digits, but int("--4") raises): two sources giving it
    used to end in a ValueError traceback; they now agree as text, and the plan refuses the value by name
    later (plan/neuron.py)."""
    s = parse_settings(
        {"SM_VLLM_MODEL": "m", "SM_VLLM_MAX_NUM_SEQS": "--4"}, extra_args=("--max-num-seqs=--4",)
    )
    assert (s.engine["max-num-seqs"].value, s.engine["max-num-seqs"].origin) == ("--4", "-- --max-num-seqs")


def test_a_superscript_digit_against_a_number_is_a_named_conflict() -> None:
    """ "²" passes str.isdigit() but not int(): SM_VLLM_MAX_NUM_SEQS=² against OPTION_MAX_ROLLING_BATCH_SIZE=4
    used to be a ValueError traceback; it is the usual conflict naming both variables."""
    with pytest.raises(ConfigError) as err:
        parse_settings(
            {"SM_VLLM_MODEL": "m", "SM_VLLM_MAX_NUM_SEQS": "\u00b2", "OPTION_MAX_ROLLING_BATCH_SIZE": "4"}
        )
    assert str(err.value) == (
        "SM_VLLM_MAX_NUM_SEQS=\u00b2 and OPTION_MAX_ROLLING_BATCH_SIZE=4 both set max-num-seqs with "
        "different values: remove one of them or make them equal"
    )
    assert err.value.variables == ("SM_VLLM_MAX_NUM_SEQS", "OPTION_MAX_ROLLING_BATCH_SIZE")


@pytest.mark.parametrize(("env_value", "value"), [("True", True), ("FALSE", False)])
def test_true_and_false_as_text_agree_in_any_case(env_value: str, value: bool) -> None:
    """SM_NEURON_<KEY>=True (Python's spelling, no JSON) is the boolean, as `true` is (it was the string
    "True", which NxD Inference reads as true even for "False"), so it agrees with the same boolean in
    SM_NEURON_OVERRIDE_CONFIG; the higher source (SM_NEURON_<KEY>) keeps its origin."""
    s = parse_settings(
        {
            "SM_VLLM_MODEL": "m",
            "SM_NEURON_ENABLE_BUCKETING": env_value,
            "SM_NEURON_OVERRIDE_CONFIG": f'{{"enable_bucketing": {str(value).lower()}}}',
        }
    )
    setting = s.override["enable_bucketing"]
    assert (setting.value, setting.origin) == (value, "SM_NEURON_ENABLE_BUCKETING")


def test_the_sm_vllm_variables_that_are_no_engine_flags_stay_out_of_the_engine_settings() -> None:
    """SM_VLLM_MODEL (a model candidate), SM_VLLM_ADDITIONAL_CONFIG and SM_VLLM_OVERRIDE_NEURON_CONFIG (JSON
    the plan merges) are read on their own: none of them becomes an engine flag setting (which the plan
    would pass on, or warn about, as `--model`, `--additional-config`, `--override-neuron-config`)."""
    s = parse_settings(
        {
            "SM_VLLM_MODEL": "m",
            "SM_VLLM_ADDITIONAL_CONFIG": '{"a": 1}',
            "SM_VLLM_OVERRIDE_NEURON_CONFIG": '{"x": 1}',
            "SM_VLLM_MAX_NUM_SEQS": "4",
        }
    )
    assert list(s.engine) == ["max-num-seqs"]
    assert [(m.value, m.origin) for m in s.models] == [("m", "SM_VLLM_MODEL")]
    assert s.additional_config == {"a": 1}
    assert (s.override["x"].value, s.override["x"].origin) == (1, "SM_VLLM_OVERRIDE_NEURON_CONFIG")


def test_a_cpu_plan_warns_once_per_dropped_override_key() -> None:
    """On the CPU engine SM_VLLM_OVERRIDE_NEURON_CONFIG's keys are dropped with one warning each, and
    the variable itself is not also warned about as a Neuron-only engine flag."""
    p = cpu_plan(
        {
            "SM_VLLM_MODEL": "m",
            "SM_VLLM_OVERRIDE_NEURON_CONFIG": '{"x": 1}',
            "SM_VLLM_ADDITIONAL_CONFIG": '{"a": 1}',
        }
    )
    assert p.warnings == (
        "SM_VLLM_OVERRIDE_NEURON_CONFIG (x) is a Neuron setting: dropped for the CPU engine",
    )
    assert p.argv[p.argv.index("--port") + 2 :] == ("--additional-config", '{"a": 1}')


@pytest.mark.parametrize(
    ("props", "dialect", "stream_format"),
    [
        ({"option.output_formatter": "SSE"}, "lmi", "sse"),
        ({"option.tgi_compat": "true"}, "tgi", "jsonlines"),
        ({"option.model_id": "m"}, "lmi", "jsonlines"),
    ],
)
def test_serving_properties_decide_the_generate_dialect(
    props: dict[str, str], dialect: str, stream_format: str
) -> None:
    """A serving.properties means an LMI deployment: /invocations speaks LMI's shapes, in the stream
    format its option.output_formatter names, unless option.tgi_compat=true (the same as OPTION_*)."""
    s = parse_settings({"SM_VLLM_MODEL": "m"}, serving_properties=props)
    assert (s.serve.dialect, s.serve.lmi_stream_format) == (dialect, stream_format)
    plain = parse_settings({"SM_VLLM_MODEL": "m"})
    assert (plain.serve.dialect, plain.serve.lmi_stream_format) == ("tgi", "jsonlines")


@pytest.mark.parametrize(("first", "second"), [("TRUE", "true"), ("False", "false")])
def test_true_and_false_strings_in_two_override_objects_agree_in_any_case(first: str, second: str) -> None:
    """Two override objects giving one key the JSON strings "TRUE" and "true" (or "False" and "false") say
    the same thing (the comparison takes true/false in any case): one setting, no conflict, and the higher
    source (SM_NEURON_OVERRIDE_CONFIG) keeps its value and origin."""
    s = parse_settings(
        {
            "SM_VLLM_MODEL": "m",
            "SM_NEURON_OVERRIDE_CONFIG": f'{{"enable_bucketing": "{first}"}}',
            "SM_VLLM_OVERRIDE_NEURON_CONFIG": f'{{"enable_bucketing": "{second}"}}',
        }
    )
    setting = s.override["enable_bucketing"]
    assert (setting.value, setting.origin) == (first, "SM_NEURON_OVERRIDE_CONFIG")


def test_two_spellings_of_one_variable_with_different_values_are_refused_naming_both() -> None:
    """SM_VLLM_MODEL and SM_VLLM_Model are one variable (names are read in any case after the prefix);
    set to different models the refusal names both spellings, in sorted order, in its text and its
    variables, so the user knows which two to reconcile."""
    with pytest.raises(ConfigError) as err:
        parse_settings({"SM_VLLM_MODEL": "a", "SM_VLLM_Model": "b"})
    assert str(err.value) == (
        "SM_VLLM_MODEL and SM_VLLM_Model are one variable with different values: remove one of them"
    )
    assert err.value.variables == ("SM_VLLM_MODEL", "SM_VLLM_Model")


def test_a_lowercase_prefix_is_not_an_sm_vllm_variable() -> None:
    """Only the part after SM_VLLM_ is read in any case: sm_vllm_model and sm_vllm_additional_config (the
    prefix itself in lower case) are not ours, exactly as sm_vllm_max_num_seqs is no engine flag. They
    neither conflict with SM_VLLM_MODEL, nor add a model, nor fill the additional config."""
    s = parse_settings(
        {
            "SM_VLLM_MODEL": "m",
            "sm_vllm_model": "other",
            "sm_vllm_additional_config": '{"a": 1}',
            "sm_vllm_max_num_seqs": "4",
        }
    )
    assert [(m.value, m.origin) for m in s.models] == [("m", "SM_VLLM_MODEL")]
    assert s.additional_config == {}
    assert s.engine == {}
