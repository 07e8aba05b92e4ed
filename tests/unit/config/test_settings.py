"""config/settings.py: table tests of every configuration mapping rule and every precedence case (no mocks,
no vLLM), and their edge cases. LMI/TGI names are in test_compat.py, the front's options in test_serve.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from neuronserve.config.settings import flag_tokens, parse_settings, sm_vllm_value
from neuronserve.errors import ConfigError
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.types import LaunchPlan

PY = "/usr/bin/python3"


def cpu_plan(env: Mapping[str, str], extra: Sequence[str] = (), **facts_kw: object) -> LaunchPlan:
    f = HostFacts(python=PY, **facts_kw)  # type: ignore[arg-type]
    return build_plan(parse_settings({"NEURONSERVE_DEVICE": "cpu", **env}, extra_args=extra), f)


def flags_after_port(p: LaunchPlan) -> list[str]:
    argv = list(p.argv)
    return argv[argv.index("--port") + 2 :]


@pytest.mark.parametrize(
    ("name", "raw", "tokens"),
    [
        ("SM_VLLM_ENFORCE_EAGER", "true", ["--enforce-eager"]),
        ("SM_VLLM_ENFORCE_EAGER", "TRUE", ["--enforce-eager"]),
        ("SM_VLLM_ENFORCE_EAGER", "True", ["--enforce-eager"]),
        ("SM_VLLM_ENFORCE_EAGER", "false", []),
        ("SM_VLLM_ENABLE_PREFIX_CACHING", "false", ["--no-enable-prefix-caching"]),
        ("SM_VLLM_ENFORCE_EAGER", "", ["--enforce-eager"]),
        ("SM_VLLM_MAX_MODEL_LEN", "256", ["--max-model-len", "256"]),
        ("SM_VLLM_ALLOWED_ORIGINS", '["a", "b c"]', ["--allowed-origins", "a", "b c"]),
        ("SM_VLLM_ALLOWED_ORIGINS", "[]", []),
        (
            "SM_VLLM_SPECULATIVE_CONFIG",
            '{"b": 1, "a": "x y"}',
            ["--speculative-config", '{"a": "x y", "b": 1}'],
        ),
        (
            "SM_VLLM_CHAT_TEMPLATE",
            "{% for m in messages %}\n{{ m }} {% endfor %}",
            ["--chat-template", "{% for m in messages %}\n{{ m }} {% endfor %}"],
        ),
        ("SM_VLLM_SEED", "  7 ", ["--seed", "  7 "]),
    ],
)
def test_sm_vllm_mapping(name: str, raw: str, tokens: list[str]) -> None:
    key = name[len("SM_VLLM_") :].lower().replace("_", "-")
    assert flag_tokens(key, sm_vllm_value(raw)) == tokens
    assert flags_after_port(cpu_plan({"SM_VLLM_MODEL": "m/x", name: raw})) == tokens


def test_sm_vllm_flags_sorted_by_name() -> None:
    p = cpu_plan(
        {
            "SM_VLLM_MODEL": "m/x",
            "SM_VLLM_SEED": "1",
            "SM_VLLM_ENFORCE_EAGER": "true",
            "SM_VLLM_MAX_NUM_SEQS": "2",
        }
    )
    assert flags_after_port(p) == ["--enforce-eager", "--max-num-seqs", "2", "--seed", "1"]


@pytest.mark.parametrize(
    ("env", "override"),
    [
        ({"SM_NEURON_ENABLE_BUCKETING": "false"}, {"enable_bucketing": False}),
        ({"SM_NEURON_SKIP_WARMUP": "true"}, {"skip_warmup": True}),
        ({"SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[64,128]"}, {"context_encoding_buckets": [64, 128]}),
        (
            {"SM_NEURON_QUANTIZATION_TYPE": "per_channel_symmetric"},
            {"quantization_type": "per_channel_symmetric"},
        ),
        ({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": "null"}, {"on_device_sampling_config": None}),
        ({"SM_NEURON_OVERRIDE_CONFIG": '{"async_mode": true}'}, {"async_mode": True}),
        (
            {"SM_NEURON_OVERRIDE_CONFIG": '{"async_mode": true}', "SM_NEURON_SKIP_WARMUP": "1"},
            {"async_mode": True, "skip_warmup": 1},
        ),
        (
            {"SM_VLLM_ADDITIONAL_CONFIG": '{"override_neuron_config": {"skip_warmup": true}}'},
            {"skip_warmup": True},
        ),
        (
            {"SM_NEURON_OVERRIDE_CONFIG": '{"skip_warmup": true}', "SM_NEURON_SKIP_WARMUP": "true"},
            {"skip_warmup": True},
        ),
    ],
)
def test_neuron_override_sources(env: dict[str, str], override: dict[str, object]) -> None:
    s = parse_settings(env)
    assert {k: v.value for k, v in s.override.items()} == override


@pytest.mark.parametrize(
    ("env", "names"),
    [
        (
            {"SM_NEURON_OVERRIDE_CONFIG": '{"skip_warmup": true}', "SM_NEURON_SKIP_WARMUP": "false"},
            {"SM_NEURON_SKIP_WARMUP", "SM_NEURON_OVERRIDE_CONFIG"},
        ),
        ({"SM_NEURON_OVERRIDE_CONFIG": "[1]"}, {"SM_NEURON_OVERRIDE_CONFIG"}),
        ({"SM_VLLM_ADDITIONAL_CONFIG": "not json"}, {"SM_VLLM_ADDITIONAL_CONFIG"}),
    ],
)
def test_neuron_override_refusals(env: dict[str, str], names: set[str]) -> None:
    with pytest.raises(ConfigError) as err:
        parse_settings(env)
    assert set(err.value.variables) == names
    for n in names:
        assert n in str(err.value)


@pytest.mark.parametrize(
    ("env", "var"),
    [
        ({"OPTION_N_POSITIONS": "lots"}, "OPTION_N_POSITIONS"),
        ({"OPTION_TENSOR_PARALLEL_DEGREE": "all"}, "OPTION_TENSOR_PARALLEL_DEGREE"),
        ({"HF_MODEL_TRUST_REMOTE_CODE": "yes"}, "HF_MODEL_TRUST_REMOTE_CODE"),
        ({"NEURONSERVE_DEVICE": "gpu"}, "NEURONSERVE_DEVICE"),
        ({"SAGEMAKER_BIND_TO_PORT": "eighty"}, "SAGEMAKER_BIND_TO_PORT"),
        ({"NEURONSERVE_INTEGRATION": "fork"}, "NEURONSERVE_INTEGRATION"),
        ({"VLLM_NEURON_FRAMEWORK": "tnx"}, "VLLM_NEURON_FRAMEWORK"),
        ({"NEURONSERVE_CACHE_READ_ONLY": "maybe"}, "NEURONSERVE_CACHE_READ_ONLY"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], var: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_settings(env)
    assert var in str(err.value) and var in err.value.variables


@pytest.mark.parametrize(
    ("env", "props", "extra", "names"),
    [
        (
            {"SM_VLLM_MAX_MODEL_LEN": "128", "OPTION_N_POSITIONS": "256"},
            {},
            (),
            {"SM_VLLM_MAX_MODEL_LEN", "OPTION_N_POSITIONS"},
        ),
        (
            {"SM_VLLM_MAX_NUM_SEQS": "4", "MAX_BATCH_SIZE": "8"},
            {},
            (),
            {"SM_VLLM_MAX_NUM_SEQS", "MAX_BATCH_SIZE"},
        ),
        (
            {"OPTION_TENSOR_PARALLEL_DEGREE": "2", "HF_NUM_CORES": "4"},
            {},
            (),
            {"OPTION_TENSOR_PARALLEL_DEGREE", "HF_NUM_CORES"},
        ),
        (
            {"OPTION_N_POSITIONS": "256"},
            {"option.n_positions": "512"},
            (),
            {"serving.properties option.n_positions", "OPTION_N_POSITIONS"},
        ),
        (
            {"SM_VLLM_MAX_MODEL_LEN": "128"},
            {},
            ("--max-model-len", "256"),
            {"-- --max-model-len", "SM_VLLM_MAX_MODEL_LEN"},
        ),
        ({"SM_VLLM_DTYPE": "bfloat16", "OPTION_DTYPE": "fp16"}, {}, (), {"SM_VLLM_DTYPE", "OPTION_DTYPE"}),
        (
            {"SM_VLLM_ENABLE_PREFIX_CACHING": "true"},
            {},
            ("--no-enable-prefix-caching",),
            {"SM_VLLM_ENABLE_PREFIX_CACHING", "-- --no-enable-prefix-caching"},
        ),
        (
            {"NEURON_COMPILED_ARTIFACTS": "s3://a/", "OPTION_COMPILED_GRAPH_PATH": "s3://b/"},
            {},
            (),
            {"NEURON_COMPILED_ARTIFACTS", "OPTION_COMPILED_GRAPH_PATH"},
        ),
        (
            {"SAGEMAKER_BIND_TO_PORT": "9000", "NEURONSERVE_ENGINE_PORT": "9000"},
            {},
            (),
            {"SAGEMAKER_BIND_TO_PORT", "NEURONSERVE_ENGINE_PORT"},
        ),
    ],
)
def test_conflicts_name_both_variables(
    env: dict[str, str], props: dict[str, str], extra: tuple[str, ...], names: set[str]
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_settings(env, serving_properties=props, extra_args=extra)
    assert set(err.value.variables) == names
    for n in names:
        assert n in str(err.value)


@pytest.mark.parametrize(
    ("env", "extra", "key", "origin"),
    [
        (
            {"SM_VLLM_MAX_MODEL_LEN": "128", "OPTION_N_POSITIONS": "128"},
            (),
            "max-model-len",
            "SM_VLLM_MAX_MODEL_LEN",
        ),
        (
            {"OPTION_MAX_ROLLING_BATCH_SIZE": "4", "MAX_BATCH_SIZE": "4"},
            (),
            "max-num-seqs",
            "OPTION_MAX_ROLLING_BATCH_SIZE",
        ),
        ({"SM_VLLM_MAX_MODEL_LEN": "128"}, ("--max-model-len=128",), "max-model-len", "-- --max-model-len"),
        ({"SM_VLLM_DTYPE": "bfloat16", "OPTION_DTYPE": "bf16"}, (), "dtype", "SM_VLLM_DTYPE"),
        (
            {"SM_VLLM_TRUST_REMOTE_CODE": "TRUE", "HF_MODEL_TRUST_REMOTE_CODE": "true"},
            (),
            "trust-remote-code",
            "SM_VLLM_TRUST_REMOTE_CODE",
        ),
    ],
)
def test_equal_values_agree_and_highest_source_is_the_origin(
    env: dict[str, str], extra: tuple[str, ...], key: str, origin: str
) -> None:
    assert parse_settings(env, extra_args=extra).engine[key].origin == origin


@pytest.mark.parametrize(
    ("env", "nonempty", "source", "origin", "uri"),
    [
        (
            {"SM_VLLM_MODEL": "a/b", "HF_MODEL_ID": "c/d", "OPTION_MODEL_ID": "e/f"},
            True,
            "hub",
            "SM_VLLM_MODEL",
            "a/b",
        ),
        (
            {"HF_MODEL_ID": "c/d", "OPTION_MODEL_ID": "e/f"},
            True,
            "sagemaker",
            "SM_MODEL_DIR",
            "/opt/ml/model",
        ),
        ({"HF_MODEL_ID": "c/d", "OPTION_MODEL_ID": "e/f"}, False, "hub", "HF_MODEL_ID", "c/d"),
        ({"OPTION_MODEL_ID": "e/f"}, False, "hub", "OPTION_MODEL_ID", "e/f"),
        ({"HF_MODEL_ID": "s3://bkt/llama/"}, False, "s3", "HF_MODEL_ID", "s3://bkt/llama/"),
        (
            {"SM_VLLM_MODEL": "s3://bkt/model.tar.gz"},
            False,
            "archive",
            "SM_VLLM_MODEL",
            "s3://bkt/model.tar.gz",
        ),
        ({"SM_VLLM_MODEL": "/models/tiny"}, False, "local", "SM_VLLM_MODEL", "/models/tiny"),
        ({"SM_VLLM_MODEL": "/models/tiny.tar.gz"}, False, "archive", "SM_VLLM_MODEL", "/models/tiny.tar.gz"),
    ],
)
def test_model_source_order(env: dict[str, str], nonempty: bool, source: str, origin: str, uri: str) -> None:
    paths = {"/models/tiny": ModelFacts("dir"), "/models/tiny.tar.gz": ModelFacts("file")}
    if nonempty:
        paths["/opt/ml/model"] = ModelFacts("dir")
    p = cpu_plan({**env, "NEURONSERVE_WORK_DIR": "/w"}, sagemaker_model_dir_nonempty=nonempty, paths=paths)
    assert (p.model.source, p.model.origin, p.model.uri) == (source, origin, uri)
    expected_local = {"hub": None, "s3": "/w/model", "archive": "/w/model"}.get(source, uri)
    assert p.model.local_path == expected_local
    assert p.argv[p.argv.index("--model") + 1] == (expected_local or uri)
    if len([k for k in env if k.endswith(("MODEL", "MODEL_ID"))]) + nonempty > 1:
        assert any("ignored" in w for w in p.warnings)


def test_hub_revision_becomes_flag_and_is_dropped_elsewhere() -> None:
    p = cpu_plan({"HF_MODEL_ID": "a/b", "HF_MODEL_REVISION": "r1"})
    assert p.model.revision == "r1" and p.argv[p.argv.index("--revision") + 1] == "r1"
    q = cpu_plan({"HF_MODEL_ID": "s3://b/m/", "HF_MODEL_REVISION": "r1"})
    assert "--revision" not in q.argv and any("HF_MODEL_REVISION ignored" in w for w in q.warnings)


@pytest.mark.parametrize(
    ("env", "var"),
    [
        ({}, "SM_VLLM_MODEL"),
        ({"SM_VLLM_MODEL": "/no/such/dir"}, "SM_VLLM_MODEL"),
        ({"HF_MODEL_ID": "./missing.tar.gz"}, "HF_MODEL_ID"),
    ],
)
def test_model_errors(env: dict[str, str], var: str) -> None:
    with pytest.raises(ConfigError) as err:
        cpu_plan(env)
    assert var in str(err.value)


def test_extra_args_verbatim_at_the_end() -> None:
    extra = ["--max-model-len", "64", "--chat-template", "a b\nc", "--seed=3"]
    p = cpu_plan({"SM_VLLM_MODEL": "a/b"}, extra=extra)
    assert list(p.argv[-len(extra) :]) == extra
    assert p.argv.count("--max-model-len") == 1


def test_extra_model_argument_is_the_first_source() -> None:
    p = cpu_plan({"SM_VLLM_MODEL": "a/b"}, extra=["--model", "c/d"])
    assert p.model.uri == "c/d" and p.model.origin == "-- --model"


def test_engine_host_and_port_are_the_plans() -> None:
    p = cpu_plan({"SM_VLLM_MODEL": "a/b", "SM_VLLM_PORT": "8000", "SM_VLLM_HOST": "0.0.0.0"})
    argv = list(p.argv)
    assert argv.count("--port") == 1 and argv[argv.index("--port") + 1] == "8081"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert any("SM_VLLM_PORT ignored" in w for w in p.warnings)


# Edge cases (first written where mutation testing showed them unchecked; docs/TESTING.md): which
# source a value is said to come from, when two sources agree, the verbatim `--` arguments, and the
# refusals word for word; how two sources' values are compared (numbers by value, negative ones too;
# true/false in any case) and the SM_VLLM_* variables that are not engine flags.


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
    later (plan/lanes/nxdi/engine.py)."""
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


def test_a_sign_apart_from_its_digits_is_text_not_a_number() -> None:
    """ "- 4" is compared as text (a blank after the sign is no number), so it conflicts with -4
    instead of crashing int()."""
    err = refusal({"SM_VLLM_MAX_NUM_SEQS": "- 4"}, extra=("--max-num-seqs", "-4"))
    assert err.variables == ("-- --max-num-seqs", "SM_VLLM_MAX_NUM_SEQS")


SWITCHES = (
    "SM_VLLM_ENABLE_LORA",
    "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE",
    "SM_VLLM_ENABLE_PREFIX_CACHING",
    "SM_VLLM_ENABLE_CHUNKED_PREFILL",
    "SM_VLLM_TRUST_REMOTE_CODE",
)


@pytest.mark.parametrize("name", SWITCHES)
@pytest.mark.parametrize("raw", ["1", "yes", "maybe"])
def test_a_switch_given_a_value_is_refused_naming_the_variable(name: str, raw: str) -> None:
    """`--enable-lora 1` would be a stray argument vLLM refuses at start (prefix caching read it as off)."""
    with pytest.raises(ConfigError) as err:
        parse_settings({"SM_VLLM_MODEL": "m/x", name: raw})
    assert f"{name}={raw!r} is a switch" in str(err.value) and err.value.variables == (name,)


@pytest.mark.parametrize("name", SWITCHES)
@pytest.mark.parametrize(("raw", "value"), [("true", True), ("", True), ("FALSE", False)])
def test_a_switch_takes_true_false_or_empty(name: str, raw: str, value: bool) -> None:
    key = name[len("SM_VLLM_") :].lower().replace("_", "-")
    setting = parse_settings({"SM_VLLM_MODEL": "m/x", name: raw}).engine[key]
    assert setting.value is value and setting.origin == name
