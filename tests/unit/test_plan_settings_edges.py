"""parse_settings edge cases (added where mutation testing showed them unchecked: docs/TESTING.md):
which source a value is said to come from, when two sources agree, the verbatim `--` arguments, and
the refusals word for word."""

from __future__ import annotations

import pytest

from neuronserve.config.settings import parse_settings, sm_vllm_value
from neuronserve.errors import ConfigError


def refusal(env: dict[str, str], extra: tuple[str, ...] = (), device: str | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        parse_settings({"SM_VLLM_MODEL": "m", **env}, extra_args=extra, device=device)
    return err.value


def test_json_lists_keep_strings_and_canonicalise_the_rest() -> None:
    assert sm_vllm_value('["a", {"b": 1, "a": 2}, 3]') == ["a", '{"a": 2, "b": 1}', "3"]


@pytest.mark.parametrize(
    ("env", "extra"),
    [
        ({"SM_VLLM_MAX_MODEL_LEN": " 4096 "}, ("--max-model-len", "4096")),
        ({"SM_VLLM_ENABLE_PREFIX_CACHING": "TRUE"}, ("--enable-prefix-caching",)),
        ({"SM_VLLM_ENABLE_PREFIX_CACHING": "False"}, ("--no-enable-prefix-caching",)),
        ({"SM_VLLM_SEED": "-1"}, ("--seed=-1",)),
    ],
)
def test_two_sources_that_agree_are_one_setting(env: dict[str, str], extra: tuple[str, ...]) -> None:
    parse_settings({"SM_VLLM_MODEL": "m", **env}, extra_args=extra)


def test_two_sources_that_disagree_are_named_with_their_values() -> None:
    err = refusal({"SM_VLLM_MAX_MODEL_LEN": "4096"}, ("--max-model-len", "2048"))
    assert str(err) == (
        "-- --max-model-len=2048 and SM_VLLM_MAX_MODEL_LEN=4096 both set max-model-len with different "
        "values: "
        "remove one of them or make them equal"
    )
    assert err.variables == ("-- --max-model-len", "SM_VLLM_MAX_MODEL_LEN")  # `--` is read first
    err = refusal({"SM_VLLM_ENABLE_PREFIX_CACHING": "true"}, ("--no-enable-prefix-caching",))
    assert str(err).startswith(
        "-- --no-enable-prefix-caching=false and SM_VLLM_ENABLE_PREFIX_CACHING=true both"
    )
    err = refusal({"SM_VLLM_MAX_MODEL_LEN": "max"}, ("--max-model-len", "-1"))
    assert err.variables == ("-- --max-model-len", "SM_VLLM_MAX_MODEL_LEN")
    parse_settings(
        {"SM_VLLM_MODEL": "m", "SM_VLLM_MAX_MODEL_LEN": "MAX"}, extra_args=("--max-model-len", "max")
    )
    parse_settings({"SM_VLLM_MODEL": "m", "SM_VLLM_DTYPE": "Float16"}, extra_args=("--dtype", "Float16"))
    err = refusal({"SM_VLLM_DTYPE": "Float16"}, ("--dtype", "float16"))  # only true/false/max fold case
    assert err.variables == ("-- --dtype", "SM_VLLM_DTYPE")


def test_verbatim_arguments_are_read_flag_by_flag() -> None:
    s = parse_settings(
        {"SM_VLLM_MODEL": "m"},
        extra_args=(
            "positional", "--enable-lora", "--no-trust-remote-code", "--max-num-seqs", "8",
            "--dtype=float16", "--model", "/other", "--unknown-flag", "x",
        ),
    )  # fmt: skip
    assert s.engine["enable-lora"].value is True and s.engine["enable-lora"].origin == "-- --enable-lora"
    assert s.engine["trust-remote-code"].value is False
    assert s.engine["trust-remote-code"].origin == "-- --no-trust-remote-code"
    assert (s.engine["max-num-seqs"].value, s.engine["max-num-seqs"].origin) == ("8", "-- --max-num-seqs")
    assert s.engine["dtype"].value == "float16"
    assert ("/other", "-- --model") in [(m.value, m.origin) for m in s.models]
    assert "no-trust-remote-code" not in s.engine and "unknown-flag" not in s.engine


def test_no_prefix_only_for_known_booleans() -> None:
    s = parse_settings({"SM_VLLM_MODEL": "m"}, extra_args=("--no-such-thing", "--max-num-seqs", "4"))
    assert s.engine["max-num-seqs"].value == "4" and "such-thing" not in s.engine


def test_a_value_flag_at_the_end_needs_its_value() -> None:
    err = refusal({}, ("--max-num-seqs",))
    assert (str(err), err.variables) == (
        "engine argument --max-num-seqs after `--` needs a value",
        ("--max-num-seqs",),
    )


@pytest.mark.parametrize(
    ("device", "env", "origin"),
    [("gpu", {}, "--device"), (None, {"NEURONSERVE_DEVICE": "gpu"}, "NEURONSERVE_DEVICE")],
)
def test_a_bad_device_names_where_it_came_from(device: str | None, env: dict[str, str], origin: str) -> None:
    err = refusal(env, device=device)
    assert (str(err), err.variables) == (f"{origin}='gpu' is not one of: auto, neuron, cpu", (origin,))


def test_the_device_setting_says_its_origin() -> None:
    assert parse_settings({"SM_VLLM_MODEL": "m"}, device="cpu").device.origin == "--device"
    assert (
        parse_settings({"SM_VLLM_MODEL": "m", "NEURONSERVE_DEVICE": "cpu"}).device.origin
        == "NEURONSERVE_DEVICE"
    )


def test_choices_name_the_variable_and_every_allowed_value() -> None:
    err = refusal({"VLLM_NEURON_FRAMEWORK": "tnx"})
    assert (str(err), err.variables) == (
        "VLLM_NEURON_FRAMEWORK='tnx' is not one of: neuronx-distributed-inference, transformers-neuronx, "
        "optimum-neuron",
        ("VLLM_NEURON_FRAMEWORK",),
    )
    s = parse_settings({"SM_VLLM_MODEL": "m", "VLLM_NEURON_FRAMEWORK": " Optimum-Neuron "})
    assert s.framework is not None and (s.framework.value, s.framework.origin) == (
        "optimum-neuron",
        "VLLM_NEURON_FRAMEWORK",
    )


@pytest.mark.parametrize("name", ["SM_NEURON_OVERRIDE_CONFIG", "SM_VLLM_OVERRIDE_NEURON_CONFIG"])
def test_override_objects_name_their_variable(name: str) -> None:
    s = parse_settings({"SM_VLLM_MODEL": "m", name: '{"tp_degree": 2}'})
    assert (s.override["tp_degree"].value, s.override["tp_degree"].origin) == (2, name)


def test_an_override_inside_additional_config_is_named_so() -> None:
    s = parse_settings(
        {"SM_VLLM_MODEL": "m", "SM_VLLM_ADDITIONAL_CONFIG": '{"override_neuron_config": {"x": 1}}'}
    )
    assert s.override["x"].origin == "SM_VLLM_ADDITIONAL_CONFIG"
    err = refusal({"SM_VLLM_ADDITIONAL_CONFIG": '{"override_neuron_config": [1]}'})
    assert (str(err), err.variables) == (
        "SM_VLLM_ADDITIONAL_CONFIG: override_neuron_config must be a JSON object",
        ("SM_VLLM_ADDITIONAL_CONFIG",),
    )


def test_neuron_environment_passes_through_as_given() -> None:
    env = {"NEURON_CONTEXT_LENGTH_BUCKETS": "128,512", "NEURON_TOKEN_GEN_BUCKETS": "512", "OTHER": "x"}
    s = parse_settings({"SM_VLLM_MODEL": "m", **env})
    assert s.passthrough_env == {
        "NEURON_CONTEXT_LENGTH_BUCKETS": "128,512",
        "NEURON_TOKEN_GEN_BUCKETS": "512",
    }
