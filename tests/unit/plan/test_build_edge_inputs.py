"""Inputs that reached the engine other than the plan said, or crashed instead of being refused (found by
mutation testing, docs/TESTING.md): engine arguments after `--` that the plan itself decides (`--model`,
`--host`, `--port`, `--max-num-batched-tokens`), a boolean flag given an inline value, empty and
mixed-case variable names, Python-style booleans in SM_NEURON_*, and digits that str.isdigit accepts but
int() refuses ("²"). Each test says what a user would have seen."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from starlette.requests import Request
from tests.support.builders import HUB_MODEL, facts, plan, refusal, resolution

from neuronserve.commands.recommend import _instance
from neuronserve.config.settings import Setting, parse_settings
from neuronserve.deploy.validate import plan_check
from neuronserve.errors import ConfigError
from neuronserve.front.app import read_limited
from neuronserve.front.completion_reader import token_id
from neuronserve.plan.build import build_plan
from neuronserve.plan.lanes.nxdi import overrides

IGNORED = (
    " ignored: the engine listens on 127.0.0.1:NEURONSERVE_ENGINE_PORT behind the front server, whose port "
    "is SAGEMAKER_BIND_TO_PORT"
)
CHUNKED = {
    **HUB_MODEL,
    "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
    "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 4}',
}


def values(argv: Sequence[str], name: str) -> list[str]:
    """Every value vLLM's argparse would see for `name` (it keeps the last)."""
    out = [argv[i + 1] for i, tok in enumerate(argv[:-1]) if tok == name]
    return out + [tok.partition("=")[2] for tok in argv if tok.startswith(name + "=")]


# 1. `-- --model X`: the plan's chosen (and staged) model is the only one vLLM sees.
@pytest.mark.parametrize("device", ["cpu", "neuron"])
def test_a_model_after_the_separator_is_staged_and_not_passed_again(device: str) -> None:
    """`-- --model s3://b/m/` is staged to a local directory; repeating the URI at the end of argv made
    vLLM (argparse keeps the last) load from S3 itself, past the staged copy."""
    p = plan({**HUB_MODEL, "SM_VLLM_MODEL": ""}, extra=["--model", "s3://b/m/", "--seed", "3"], device=device)
    assert values(p.argv, "--model") == ["/tmp/neuronserve/model"]
    assert "s3://b/m/" not in p.argv
    assert list(p.argv[-2:]) == ["--seed", "3"]


def test_two_models_after_the_separator_give_the_engine_the_one_the_plan_names() -> None:
    """`-- --model org/a --model=org/b`: the plan says org/a; vLLM loaded org/b (the last)."""
    p = plan({}, facts(cores=None), device="cpu", extra=["--model", "org/a", "--model=org/b"])
    assert p.model.uri == "org/a"
    assert values(p.argv, "--model") == ["org/a"]
    assert "model from -- --model; also configured and ignored: -- --model=org/b" in p.warnings


# 2. `-- --port N` / `-- --host H`: the engine listens where the front proxies to.
@pytest.mark.parametrize("device", ["cpu", "neuron"])
def test_host_and_port_after_the_separator_are_dropped_with_a_warning(device: str) -> None:
    p = plan(HUB_MODEL, extra=["--port", "9000", "--host=0.0.0.0", "--seed", "3"], device=device)
    assert values(p.argv, "--port") == ["8081"]
    assert values(p.argv, "--host") == ["127.0.0.1"]
    assert list(p.argv[-2:]) == ["--seed", "3"]
    assert "-- --port" + IGNORED in p.warnings
    assert "-- --host" + IGNORED in p.warnings


def test_a_port_after_the_separator_does_not_give_two_replicas_one_port() -> None:
    p = plan({**HUB_MODEL, "SM_VLLM_DATA_PARALLEL_SIZE": "2"}, extra=["--port=9000"])
    assert [values(r.argv, "--port") for r in p.replicas] == [["8081"], ["8082"]]


# 3. `-- --max-num-batched-tokens N` is a setting the plan reads, checks and passes once.
def test_max_num_batched_tokens_after_the_separator_is_read() -> None:
    s = parse_settings({"SM_VLLM_MODEL": "m"}, extra_args=("--max-num-batched-tokens", "64"))
    assert s.engine["max-num-batched-tokens"] == Setting("64", "-- --max-num-batched-tokens")


def test_max_num_batched_tokens_from_two_sources_must_agree() -> None:
    with pytest.raises(ConfigError) as err:
        parse_settings(
            {"SM_VLLM_MODEL": "m", "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "128"},
            extra_args=("--max-num-batched-tokens=64",),
        )
    assert str(err.value) == (
        "-- --max-num-batched-tokens=64 and SM_VLLM_MAX_NUM_BATCHED_TOKENS=128 both set "
        "max-num-batched-tokens with different values: remove one of them or make them equal"
    )
    assert err.value.variables == ("-- --max-num-batched-tokens", "SM_VLLM_MAX_NUM_BATCHED_TOKENS")


def test_max_num_batched_tokens_after_the_separator_is_the_compiled_chunk_passed_once() -> None:
    p = plan(CHUNKED, extra=["--max-num-batched-tokens", "64"])
    assert values(p.argv, "--max-num-batched-tokens") == ["64"]
    err = refusal(CHUNKED, extra=["--max-num-batched-tokens", "256"])  # above max_model_len 128
    assert err.variables == ("-- --max-num-batched-tokens",)


def test_max_num_batched_tokens_after_the_separator_without_chunked_prefill_is_said_ignored() -> None:
    p = plan(HUB_MODEL, extra=["--max-num-batched-tokens", "64"])
    assert any(w.startswith("-- --max-num-batched-tokens ignored: without chunked") for w in p.warnings)


# 4. An empty compiled-graph path is no path.
@pytest.mark.parametrize(
    ("env", "props"),
    [({"OPTION_COMPILED_GRAPH_PATH": ""}, {}), ({}, {"option.compiled_graph_path": " "})],
)
def test_an_empty_compiled_graph_path_is_unset(env: dict[str, str], props: dict[str, str]) -> None:
    """It was a local artifacts dir "" (NEURON_COMPILED_ARTIFACTS="") that also conflicted with
    NEURONSERVE_CACHE_URI."""
    s = parse_settings({**HUB_MODEL, **env}, serving_properties=props)
    assert s.artifacts is None
    p = build_plan(
        parse_settings({**HUB_MODEL, **env, "NEURONSERVE_CACHE_URI": "s3://b/c"}, serving_properties=props),
        facts(),
    )
    assert p.artifacts.mode == "keyed" and p.env["NEURON_COMPILED_ARTIFACTS"]


def test_an_empty_lmi_model_id_is_unset() -> None:
    s = parse_settings({"OPTION_MODEL_ID": " "})
    assert s.models == ()


# 5. "²" is a digit to str.isdigit but not to int(): refused by name instead of a traceback.
@pytest.mark.parametrize(
    "var",
    [
        "SM_VLLM_MAX_NUM_SEQS",
        "SM_VLLM_TENSOR_PARALLEL_SIZE",
        "SM_VLLM_MAX_MODEL_LEN",
        "NEURON_LOGICAL_NC_CONFIG",
        "OPTION_MAX_ROLLING_BATCH_SIZE",
        "OPTION_TENSOR_PARALLEL_DEGREE",
        "NEURONSERVE_MIN_READY_REPLICAS",
        "NEURON_ON_DEVICE_SAMPLING_DISABLED",
    ],
)
def test_a_superscript_digit_is_refused_naming_its_variable(var: str) -> None:
    same = {"OPTION_MAX_ROLLING_BATCH_SIZE": "SM_VLLM_MAX_NUM_SEQS"}
    same["OPTION_TENSOR_PARALLEL_DEGREE"] = "SM_VLLM_TENSOR_PARALLEL_SIZE"
    env = {k: v for k, v in HUB_MODEL.items() if k != same.get(var)}  # no conflict to refuse instead
    err = refusal({**env, var: "²"})
    assert err.variables == (var,)


def test_a_negative_zero_with_two_signs_is_refused_for_on_device_sampling() -> None:
    """`--0` passed lstrip("-").isdigit() and crashed int()."""
    err = refusal({**HUB_MODEL, "NEURON_ON_DEVICE_SAMPLING_DISABLED": "--0"})
    assert err.variables == ("NEURON_ON_DEVICE_SAMPLING_DISABLED",)


def test_deploy_tensor_parallel_with_a_superscript_digit_is_refused() -> None:
    """The deploy tools run the container's plan (deploy/validate.py): its refusal, naming the variable."""
    env = {**HUB_MODEL, "SM_VLLM_TENSOR_PARALLEL_SIZE": "²"}
    with pytest.raises(ConfigError) as err:
        plan_check(env, "ml.inf2.xlarge", "sagemaker")
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE" in str(err.value) and "²" in str(err.value)
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE" in err.value.variables


def test_a_plugin_version_with_a_superscript_digit_does_not_crash() -> None:
    overrides.check_lora(
        True,
        "0.2.2²",
        resolution({"enable-lora": "SM_VLLM_ENABLE_LORA"}, override={"lora_ckpt_json": "/a.json"}),
    )


def test_a_token_id_with_a_superscript_digit_is_a_token_text() -> None:
    assert token_id("token_id:²", {}) == (None, "token_id:²")


# 6. SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=false is unset, for pa_num_blocks too.
def test_pa_num_blocks_with_the_block_count_false_is_refused_as_when_unset() -> None:
    prefix = {**HUB_MODEL, "SM_VLLM_ENABLE_PREFIX_CACHING": "true", "SM_NEURON_PA_NUM_BLOCKS": "16"}
    unset = refusal(prefix)
    false = refusal({**prefix, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "false"})
    assert str(false) == str(unset)
    assert false.variables == ("SM_NEURON_PA_NUM_BLOCKS", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE")


# 7. A boolean flag after `--` takes no value (vLLM's BooleanOptionalAction refuses one).
@pytest.mark.parametrize(
    "arg", ["--enable-prefix-caching=false", "--no-enable-prefix-caching=true", "--trust-remote-code=0"]
)
def test_a_boolean_flag_with_an_inline_value_is_refused(arg: str) -> None:
    """`--enable-prefix-caching=false` was read as true."""
    name = arg[2:].partition("=")[0].removeprefix("no-")
    with pytest.raises(ConfigError) as err:
        parse_settings({"SM_VLLM_MODEL": "m"}, extra_args=(arg,))
    assert str(err.value) == (
        f"engine argument {arg} after `--`: --{name} takes no value (vLLM refuses one): "
        f"use --{name} or --no-{name}"
    )
    assert err.value.variables == (f"--{arg[2:].partition('=')[0]}",)


# 8. Mixed-case SM_VLLM_* names mean what their upper-case names mean (the AWS DLC lowercases them).
def test_a_mixed_case_model_is_the_sm_vllm_model() -> None:
    p = build_plan(
        parse_settings({"SM_VLLM_Model": "org/a", "HF_MODEL_ID": "org/b"}, device="cpu"),
        facts(cores=None, sagemaker_model_dir_nonempty=True),
    )
    assert p.model.uri == "org/a" and p.model.origin == "SM_VLLM_Model"  # before /opt/ml/model


@pytest.mark.parametrize("name", ["SM_VLLM_Additional_Config", "SM_VLLM_additional_config"])
def test_a_mixed_case_additional_config_is_read(name: str) -> None:
    s = parse_settings(
        {"SM_VLLM_MODEL": "m", name: '{"x": 1, "override_neuron_config": {"enable_bucketing": false}}'}
    )
    assert s.additional_config == {"x": 1}
    assert s.override == {"enable_bucketing": Setting(False, name)}
    assert "additional-config" not in s.engine


@pytest.mark.parametrize("name", ["SM_VLLM_Override_Neuron_Config", "SM_NEURON_Override_Config"])
def test_mixed_case_override_objects_are_read(name: str) -> None:
    s = parse_settings({"SM_VLLM_MODEL": "m", name: '{"enable_bucketing": false}'})
    assert s.override == {"enable_bucketing": Setting(False, name)}
    assert "override-neuron-config" not in s.engine


def test_two_spellings_of_one_object_that_disagree_are_refused_naming_both() -> None:
    with pytest.raises(ConfigError) as err:
        parse_settings(
            {"SM_VLLM_MODEL": "m", "SM_VLLM_ADDITIONAL_CONFIG": '{"x": 1}', "SM_VLLM_Additional_Config": "{}"}
        )
    assert err.value.variables == ("SM_VLLM_ADDITIONAL_CONFIG", "SM_VLLM_Additional_Config")
    s = parse_settings(
        {
            "SM_VLLM_MODEL": "m",
            "SM_VLLM_ADDITIONAL_CONFIG": '{"x": 1}',
            "SM_VLLM_Additional_Config": '{"x":1}',
        }
    )
    assert s.additional_config == {"x": 1}


# 9. SM_NEURON_* booleans in Python's spelling are booleans.
@pytest.mark.parametrize(
    ("raw", "value"),
    [("False", False), ("TRUE", True), (" true ", True), ("false", False), ("1", 1), ("abc", "abc")],
)
def test_sm_neuron_booleans_in_any_case(raw: str, value: object) -> None:
    """`False` is not JSON: it reached override_neuron_config as the (truthy) string "False"."""
    s = parse_settings({"SM_VLLM_MODEL": "m", "SM_NEURON_ENABLE_BUCKETING": raw})
    assert s.override["enable_bucketing"].value == value


def test_recommend_with_a_superscript_logical_core_count_does_not_crash() -> None:
    """NEURON_LOGICAL_NC_CONFIG=² is no count (like any other non-number), not a ValueError traceback."""

    class Args:
        instance_type = "ml.inf2.xlarge"

    assert _instance(Args(), {"NEURON_LOGICAL_NC_CONFIG": "²"}).cores == 2  # type: ignore[arg-type]


def test_a_superscript_content_length_is_no_declared_length() -> None:
    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    scope = {"type": "http", "method": "POST", "headers": [(b"content-length", "²".encode("latin-1"))]}
    assert asyncio.run(read_limited(Request(scope, receive), 100)) == b"{}"
