"""Lane 2.32's engine (vllm-neuron 0.24.0.1.1.0 on vLLM 0.24.0, plan/lanes/native/engine.py), through the
whole plan (build_plan): the forbidden flags, the explicit KV flags, the sampling mode and what requests
may ask, and the argv against vLLM 0.24.0's CLI.
"""

from __future__ import annotations

import json

import pytest
from tests.support import vllm_cli
from tests.support.builders import refusal
from tests.support.native_lane import BASE, build, laptop, neuron_config, refused

from neuronserve.plan.facts import ModelFacts


def test_no_nxd_inference_flags_or_environment_even_when_2_27_would_set_them() -> None:
    p = build({"SM_VLLM_ENABLE_CHUNKED_PREFILL": "true", "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512"})
    argv = list(p.argv)
    for flag in (
        "--device",
        "--num-gpu-blocks-override",
        "--override-neuron-config",
        "--enable-chunked-prefill",
    ):
        assert flag not in argv
    for name in ("VLLM_NEURON_FRAMEWORK", "NEURON_COMPILED_ARTIFACTS", "DISABLE_NEURON_CUSTOM_SCHEDULER"):
        assert name not in p.env
    assert argv[argv.index("--max-num-batched-tokens") + 1] == "512"
    assert any("SM_VLLM_ENABLE_CHUNKED_PREFILL ignored in lane 2.32" in w for w in p.warnings)
    assert p.integration == "native"


def test_a_users_num_gpu_blocks_override_is_passed_on_and_said() -> None:
    p = build({"SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "512"})
    argv = list(p.argv)
    assert argv[argv.index("--num-gpu-blocks-override") + 1] == "512"
    assert any(w.startswith("SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=512 passed on") for w in p.warnings)


@pytest.mark.parametrize(
    ("given", "flag"),
    [
        (None, "--enable-prefix-caching"),
        ("true", "--enable-prefix-caching"),
        ("false", "--no-enable-prefix-caching"),
    ],
)
def test_prefix_caching_and_block_size_are_explicit(given: str | None, flag: str) -> None:
    env = {} if given is None else {"SM_VLLM_ENABLE_PREFIX_CACHING": given}
    p = build(env)
    argv = list(p.argv)
    assert flag in argv and argv[argv.index("--block-size") + 1] == "32"
    assert any(w.startswith("prefix caching on (lane 2.32's default") for w in p.warnings) == (given is None)


def test_sampling_is_on_the_cpu_unless_configured_and_requests_follow_it() -> None:
    cpu = build({})
    assert neuron_config(cpu)["on_device_sampling_config"] is None
    assert "--no-async-scheduling" in cpu.argv
    rs = cpu.request_support
    assert (rs.logprobs, rs.penalties, rs.structured_outputs, rs.prompt_logprobs) == (
        True,
        True,
        False,
        False,
    )
    assert "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG" in rs.why["structured_outputs"]

    dev = build({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"temperature": "0"}'})
    assert "--no-async-scheduling" not in dev.argv
    rs = dev.request_support
    assert (rs.logprobs, rs.penalties, rs.structured_outputs, rs.prompt_logprobs) == (
        False,
        False,
        True,
        False,
    )
    assert "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null" in rs.why["logprobs"]


def test_nxd_inference_sampling_keys_are_refused_naming_the_2_32_keys() -> None:
    err = refused({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"dynamic": true, "global_topk": 64}'})
    assert "dynamic, global_topk not in this lane (2.32)" in str(err)
    assert "all_greedy, temperature, top_k, top_p" in str(err)


def test_speculation_needs_on_device_sampling_and_keys_the_draft() -> None:
    spec = json.dumps({"method": "eagle3", "model": "/d", "num_speculative_tokens": 3})
    draft = {
        "/d": ModelFacts("dir", {"architectures": ["LlamaForCausalLMEagle3"]}, "e" * 64, weights_digest="w")
    }
    err = refusal({**BASE, "SM_VLLM_SPECULATIVE_CONFIG": spec}, laptop(paths=draft))
    assert "needs on-device sampling in lane 2.32" in str(err)
    assert "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG" in err.variables
    env = {"SM_VLLM_SPECULATIVE_CONFIG": spec, "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"temperature": "0"}'}
    p = build(env, paths=draft)
    assert "--no-async-scheduling" not in p.argv  # the plugin turns it off itself with speculation
    other = {
        "/d": ModelFacts("dir", {"architectures": ["LlamaForCausalLMEagle3"]}, "f" * 64, weights_digest="w")
    }
    assert build(env, paths=other).cache_key != p.cache_key


def test_neuron_quant_is_refused_naming_the_neuron_config_field() -> None:
    err = refused({"SM_VLLM_QUANTIZATION": "neuron_quant"})
    assert "not in this lane (2.32)" in str(err) and "SM_NEURON_QUANTIZATION" in str(err)
    assert err.variables == ("SM_VLLM_QUANTIZATION",)


def test_lora_is_refused_not_in_this_lane() -> None:
    err = refused({"SM_VLLM_ENABLE_LORA": "true"})
    assert "LoRA is not in this lane (2.32)" in str(err) and "NEURONSERVE_STACK=2.28" in str(err)


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"all_greedy": true}'},
        {"SM_VLLM_ENABLE_PREFIX_CACHING": "false", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "256"},
        {"SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[128, 1024]", "SM_VLLM_BLOCK_SIZE": "64"},
        {"SM_VLLM_ENABLE_CHUNKED_PREFILL": "true", "SM_VLLM_KV_CACHE_DTYPE": "fp8"},
    ],
)
def test_the_argv_is_valid_against_vllm_0_24_0s_cli(env: dict[str, str]) -> None:
    argv = list(build(env).argv)
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert vllm_cli.check_argv(argv, "0.24.0") == []


def test_the_cli_check_refuses_the_flags_this_lane_must_not_render() -> None:
    bad = vllm_cli.check_argv(["--device", "neuron", "--override-neuron-config", "{}"], "0.24.0")
    assert len(bad) == 2


def test_the_2_27_sampling_switch_is_refused_unless_zero() -> None:
    err = refused({"NEURON_ON_DEVICE_SAMPLING_DISABLED": "1"})
    assert "not in this lane (2.32)" in str(err)
    assert err.variables == ("NEURON_ON_DEVICE_SAMPLING_DISABLED",)
    assert build({"NEURON_ON_DEVICE_SAMPLING_DISABLED": "0"}).env["VLLM_CACHE_ROOT"]
