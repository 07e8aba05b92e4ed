"""Table tests of every configuration mapping rule and every precedence case (no mocks, no vLLM)."""

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
    ("env", "key", "value", "origin"),
    [
        (
            {"OPTION_TENSOR_PARALLEL_DEGREE": "4"},
            "tensor-parallel-size",
            "4",
            "OPTION_TENSOR_PARALLEL_DEGREE",
        ),
        (
            {"OPTION_TENSOR_PARALLEL_DEGREE": "max"},
            "tensor-parallel-size",
            "max",
            "OPTION_TENSOR_PARALLEL_DEGREE",
        ),
        ({"TENSOR_PARALLEL_DEGREE": "2"}, "tensor-parallel-size", "2", "TENSOR_PARALLEL_DEGREE"),
        ({"OPTION_MAX_ROLLING_BATCH_SIZE": "8"}, "max-num-seqs", "8", "OPTION_MAX_ROLLING_BATCH_SIZE"),
        ({"OPTION_N_POSITIONS": "2048"}, "max-model-len", "2048", "OPTION_N_POSITIONS"),
        ({"OPTION_MAX_MODEL_LEN": "1024"}, "max-model-len", "1024", "OPTION_MAX_MODEL_LEN"),
        ({"OPTION_DTYPE": "bf16"}, "dtype", "bfloat16", "OPTION_DTYPE"),
        ({"OPTION_DTYPE": "fp16"}, "dtype", "float16", "OPTION_DTYPE"),
        ({"OPTION_TRUST_REMOTE_CODE": "true"}, "trust-remote-code", True, "OPTION_TRUST_REMOTE_CODE"),
        ({"HF_MODEL_REVISION": "main"}, "revision", "main", "HF_MODEL_REVISION"),
        ({"HF_REVISION": "v2"}, "revision", "v2", "HF_REVISION"),
        ({"OPTION_REVISION": "v3"}, "revision", "v3", "OPTION_REVISION"),
        ({"HF_MODEL_TRUST_REMOTE_CODE": "false"}, "trust-remote-code", False, "HF_MODEL_TRUST_REMOTE_CODE"),
        ({"HF_NUM_CORES": "2"}, "tensor-parallel-size", "2", "HF_NUM_CORES"),
        ({"MAX_BATCH_SIZE": "4"}, "max-num-seqs", "4", "MAX_BATCH_SIZE"),
        ({"MAX_TOTAL_TOKENS": "4096"}, "max-model-len", "4096", "MAX_TOTAL_TOKENS"),
        ({"HF_AUTO_CAST_TYPE": "bf16"}, "dtype", "bfloat16", "HF_AUTO_CAST_TYPE"),
        ({}, "max-model-len", "512", "serving.properties option.n_positions"),
    ],
)
def test_compat_mapping(env: dict[str, str], key: str, value: object, origin: str) -> None:
    props = {"option.n_positions": "512", "engine": "Python"} if not env else {}
    s = parse_settings(env, serving_properties=props)
    assert s.engine[key].value == value and s.engine[key].origin == origin


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


def test_unknown_option_keys_warned_by_name() -> None:
    s = parse_settings(
        {"OPTION_ROLLING_BATCH": "vllm", "OPTION_FOO_BAR": "1"}, serving_properties={"option.weird": "x"}
    )
    assert any("OPTION_FOO_BAR" in w and "option.weird" in w and "ROLLING" not in w for w in s.warnings)
    assert parse_settings({"OPTION_ROLLING_BATCH": "vllm"}).warnings == ()


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


def test_serve_options() -> None:
    s = parse_settings(
        {
            "SAGEMAKER_BIND_TO_PORT": "9090",
            "NEURONSERVE_ENGINE_PORT": "9191",
            "SAGEMAKER_MAX_PAYLOAD_IN_MB": "12",
            "NEURONSERVE_MAX_CONCURRENCY": "0",
            "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "90",
            "NEURONSERVE_DRAIN_GRACE_S": "5",
            "SAGEMAKER_STARTUP_TIMEOUT": "1800",
            "NEURONSERVE_WORK_DIR": "/scratch",
        }
    )
    assert (s.serve.port, s.engine_port, s.serve.max_payload_mb, s.serve.max_concurrency) == (
        9090,
        9191,
        12.0,
        0,
    )
    assert (s.serve.request_timeout_s, s.serve.drain_grace_s, s.serve.startup_timeout_s) == (
        90.0,
        5.0,
        1800.0,
    )
    assert s.work_dir == "/scratch"
    d = parse_settings({})
    assert (d.serve.port, d.engine_port, d.serve.max_payload_mb, d.serve.max_concurrency) == (
        8080,
        8081,
        6.0,
        256,
    )
    assert d.serve.startup_timeout_s is None and d.work_dir == "/tmp/neuronserve"


def test_engine_host_and_port_are_the_plans() -> None:
    p = cpu_plan({"SM_VLLM_MODEL": "a/b", "SM_VLLM_PORT": "8000", "SM_VLLM_HOST": "0.0.0.0"})
    argv = list(p.argv)
    assert argv.count("--port") == 1 and argv[argv.index("--port") + 1] == "8081"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert any("SM_VLLM_PORT ignored" in w for w in p.warnings)
