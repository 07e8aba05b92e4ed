"""Each rule of shared/NEURON.md "Rules that fail late", both ways: a configuration that passes and one
that is refused with a message naming the variable to change and a value that would work."""

from __future__ import annotations

import json

import pytest
from tests.support.builders import LLAMA, LLAMA_ENV, additional, flag, llama_facts, llama_plan, llama_refused

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import ModelFacts


# Rule 1: --max-model-len always passed, derived from config.json when not given (and said).
def test_rule1_max_model_len_derived_and_said() -> None:
    p = build_plan(
        parse_settings({"SM_VLLM_MODEL": "/m", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}), llama_facts()
    )
    assert flag(p, "--max-model-len") == "2048"
    assert any("max_model_len derived" in w and "SM_VLLM_MAX_MODEL_LEN" in w for w in p.warnings)


def test_rule1_max_model_len_refused_without_source() -> None:
    with pytest.raises(ConfigError) as err:
        build_plan(
            parse_settings({"SM_VLLM_MODEL": "org/hub-model", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}),
            llama_facts(),
        )
    assert "SM_VLLM_MAX_MODEL_LEN" in str(err.value) and "4096" in str(err.value)


# Rule 2: --max-num-seqs always passed.
def test_rule2_max_num_seqs_explicit() -> None:
    env = {k: v for k, v in LLAMA_ENV.items() if k != "SM_VLLM_MAX_NUM_SEQS"}
    p = build_plan(parse_settings(env), llama_facts())
    assert flag(p, "--max-num-seqs") == "8" and any("SM_VLLM_MAX_NUM_SEQS" in w for w in p.warnings)
    assert flag(llama_plan({}), "--max-num-seqs") == "4"


# Rule 3: TP within the visible cores; defaults to all of them; LMI `max`.
@pytest.mark.parametrize(("cores", "tp"), [(2, "2"), (24, "24"), (32, "8")])
def test_rule3_tp_fits(cores: int, tp: str) -> None:
    assert (
        flag(llama_plan({"SM_VLLM_TENSOR_PARALLEL_SIZE": tp}, llama_facts(cores)), "--tensor-parallel-size")
        == tp
    )


@pytest.mark.parametrize(
    ("cores", "tp", "var"), [(24, "32", "SM_VLLM_TENSOR_PARALLEL_SIZE"), (2, "4", "HF_NUM_CORES")]
)
def test_rule3_tp_refused(cores: int, tp: str, var: str) -> None:
    env = {"SM_VLLM_TENSOR_PARALLEL_SIZE": ""} if var != "SM_VLLM_TENSOR_PARALLEL_SIZE" else {}
    settings = {**LLAMA_ENV, **env, var: tp}
    if var != "SM_VLLM_TENSOR_PARALLEL_SIZE":
        del settings["SM_VLLM_TENSOR_PARALLEL_SIZE"]
    with pytest.raises(ConfigError) as err:
        build_plan(parse_settings(settings), llama_facts(cores))
    assert f"{var}={cores}" in str(err.value)


def test_rule3_tp_defaults_to_visible_and_max() -> None:
    env = {k: v for k, v in LLAMA_ENV.items() if k != "SM_VLLM_TENSOR_PARALLEL_SIZE"}
    assert flag(build_plan(parse_settings(env), llama_facts(12)), "--tensor-parallel-size") == "12"
    lmi = {**env, "OPTION_TENSOR_PARALLEL_DEGREE": "max"}
    assert flag(build_plan(parse_settings(lmi), llama_facts(24)), "--tensor-parallel-size") == "24"
    with pytest.raises(ConfigError) as err:
        build_plan(parse_settings(env), llama_facts(None))
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE" in str(err.value)


def test_rule3_visible_cores_env_is_passed_to_engine() -> None:
    p = llama_plan({"NEURON_RT_VISIBLE_CORES": "4-5"})
    assert p.env["NEURON_RT_VISIBLE_CORES"] == "4-5"


# Rule 4: KV-cache mode explicit.
def test_rule4_contiguous_by_default() -> None:
    p = llama_plan({})
    assert "--no-enable-prefix-caching" in p.argv and "--block-size" not in p.argv


def test_rule4_prefix_caching_computes_blocks_and_keys() -> None:
    p = llama_plan({"SM_VLLM_ENABLE_PREFIX_CACHING": "true", "SM_VLLM_BLOCK_SIZE": "32"})
    assert "--enable-prefix-caching" in p.argv
    assert flag(p, "--num-gpu-blocks-override") == str(2048 // 32 * 4)
    assert additional(p)["override_neuron_config"] == {"is_block_kv_layout": True, "is_prefix_caching": True}


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"SM_VLLM_BLOCK_SIZE": "48"}, "SM_VLLM_BLOCK_SIZE=48"),
        ({"SM_VLLM_BLOCK_SIZE": "32", "SM_VLLM_MAX_MODEL_LEN": "2000"}, "SM_VLLM_MAX_MODEL_LEN=2016"),
        (
            {"SM_VLLM_BLOCK_SIZE": "32", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "100"},
            "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=256",
        ),
        ({"SM_NEURON_IS_PREFIX_CACHING": "false"}, "SM_NEURON_IS_PREFIX_CACHING"),
    ],
)
def test_rule4_prefix_caching_refused(env: dict[str, str], needle: str) -> None:
    assert needle in llama_refused({"SM_VLLM_ENABLE_PREFIX_CACHING": "true", **env})


def test_rule6_short_prefix_length_is_warned() -> None:
    short = llama_plan({"SM_VLLM_ENABLE_PREFIX_CACHING": "true", "SM_VLLM_MAX_MODEL_LEN": "256"})
    assert any("SM_VLLM_MAX_MODEL_LEN=512" in w for w in short.warnings)
    assert not any(
        "SM_VLLM_MAX_MODEL_LEN=512" in w
        for w in llama_plan({"SM_VLLM_ENABLE_PREFIX_CACHING": "true"}).warnings
    )


def test_rule4_prefix_key_without_prefix_caching_refused() -> None:
    assert "SM_VLLM_ENABLE_PREFIX_CACHING=true" in llama_refused({"SM_NEURON_IS_PREFIX_CACHING": "true"})


# Rule 5: pa_num_blocks needs a matching --num-gpu-blocks-override.
def test_rule5_pa_num_blocks_with_matching_flag() -> None:
    p = llama_plan(
        {
            "SM_VLLM_ENABLE_PREFIX_CACHING": "true",
            "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "300",
            "SM_NEURON_PA_NUM_BLOCKS": "300",
        }
    )
    assert flag(p, "--num-gpu-blocks-override") == "300"


@pytest.mark.parametrize(
    "env",
    [
        {"SM_VLLM_ENABLE_PREFIX_CACHING": "true", "SM_NEURON_PA_NUM_BLOCKS": "300"},
        {
            "SM_VLLM_ENABLE_PREFIX_CACHING": "true",
            "SM_NEURON_PA_NUM_BLOCKS": "300",
            "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "400",
        },
    ],
)
def test_rule5_pa_num_blocks_refused(env: dict[str, str]) -> None:
    msg = llama_refused(env)
    assert "SM_NEURON_PA_NUM_BLOCKS" in msg and "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=300" in msg


# Rule 6: buckets.
def test_rule6_buckets_pass() -> None:
    p = llama_plan(
        {"SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[512, 2048]", "SM_NEURON_TOKEN_GENERATION_BUCKETS": "[2048]"}
    )
    assert additional(p)["override_neuron_config"] == {
        "context_encoding_buckets": [512, 2048],
        "token_generation_buckets": [2048],
    }
    llama_plan(
        {
            "SM_VLLM_ENABLE_PREFIX_CACHING": "true",
            "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[512, 1024]",
            "SM_NEURON_PREFIX_BUCKETS": "[512, 1024]",
            "SM_NEURON_TOKEN_GENERATION_BUCKETS": "[256]",
        }
    )


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[512, 4096]"}, "SM_VLLM_MAX_MODEL_LEN"),
        ({"SM_NEURON_TOKEN_GENERATION_BUCKETS": "[4096]"}, "2048"),
        ({"SM_NEURON_CONTEXT_ENCODING_BUCKETS": "512"}, "SM_NEURON_CONTEXT_ENCODING_BUCKETS"),
    ],
)
def test_rule6_buckets_refused(env: dict[str, str], needle: str) -> None:
    assert needle in llama_refused(env)


# Rule 7: chunked prefill.
def test_rule7_chunked_prefill_pass() -> None:
    p = llama_plan(
        {"SM_VLLM_ENABLE_CHUNKED_PREFILL": "true", "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 4}'}
    )
    assert "--enable-chunked-prefill" in p.argv and "--block-size" in p.argv
    assert p.env["DISABLE_NEURON_CUSTOM_SCHEDULER"] == "1"
    assert additional(p)["override_neuron_config"] == {
        "chunked_prefill_config": {"max_num_seqs": 4},
        "is_block_kv_layout": True,
    }


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        (
            {"SM_VLLM_ENABLE_CHUNKED_PREFILL": "true"},
            "SM_NEURON_CHUNKED_PREFILL_CONFIG='{\"max_num_seqs\": 4}'",
        ),
        (
            {
                "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
                "SM_NEURON_CHUNKED_PREFILL_CONFIG": "{}",
                "DISABLE_NEURON_CUSTOM_SCHEDULER": "0",
            },
            "DISABLE_NEURON_CUSTOM_SCHEDULER",
        ),
        ({"SM_NEURON_CHUNKED_PREFILL_CONFIG": "{}"}, "SM_VLLM_ENABLE_CHUNKED_PREFILL=true"),
    ],
)
def test_rule7_chunked_prefill_refused(env: dict[str, str], needle: str) -> None:
    assert needle in llama_refused(env)


# Rule 8: LoRA, non-generate tasks, Pixtral/LLaVA/GPT-OSS.
@pytest.mark.parametrize(
    ("env", "config", "needle"),
    [
        ({"SM_VLLM_ENABLE_LORA": "true"}, None, "SM_VLLM_ENABLE_LORA"),
        ({"SM_VLLM_TASK": "embed"}, None, "SM_VLLM_TASK=generate"),
        ({"SM_VLLM_RUNNER": "pooling"}, None, "SM_VLLM_RUNNER=generate"),
        # LlavaForConditionalGeneration (Pixtral) plans on 0.2.2+lts: tests/unit/plan/test_multimodal.py
        ({}, {"model_type": "pixtral", "architectures": ["PixtralForConditionalGeneration"]}, "Pixtral"),
        ({}, {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"]}, "GPT-OSS"),
    ],
)
def test_rule8_refused(env: dict[str, str], config: dict[str, object] | None, needle: str) -> None:
    assert needle in llama_refused(env, llama_facts(2, config) if config else None)


def test_rule8_generate_passes() -> None:
    llama_plan({"SM_VLLM_TASK": "generate", "SM_VLLM_ENABLE_LORA": "false"})


# Rule 9: sequence parallel needs every prefill bucket (max_model_len included) divisible by TP.
def test_rule9_sequence_parallel() -> None:
    llama_plan({"SM_NEURON_SEQUENCE_PARALLEL_ENABLED": "true", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2"})
    msg = llama_refused({"SM_NEURON_SEQUENCE_PARALLEL_ENABLED": "true", "SM_VLLM_MAX_MODEL_LEN": "2049"})
    assert "[2049] are not" in msg and "SM_VLLM_MAX_MODEL_LEN" in msg


# Rule 10: NEURON_ON_DEVICE_SAMPLING_DISABLED is broken; use the override.
def test_rule10_sampling_switch() -> None:
    p = llama_plan({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": "null"})
    assert additional(p)["override_neuron_config"] == {"on_device_sampling_config": None}
    assert "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null" in llama_refused(
        {"NEURON_ON_DEVICE_SAMPLING_DISABLED": "1"}
    )


# Rule 11: supported architectures.
@pytest.mark.parametrize(
    "arch", ["LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM"]
)
def test_rule11_supported(arch: str) -> None:
    llama_plan({}, llama_facts(2, {"architectures": [arch], "num_key_value_heads": 8, "head_dim": 64}))


def test_rule11_unsupported_and_unknown() -> None:
    assert "LlamaForCausalLM, Llama4ForCausalLM" in llama_refused(
        {}, llama_facts(2, {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})
    )
    p = build_plan(parse_settings({**LLAMA_ENV, "SM_VLLM_MODEL": "org/x"}), llama_facts())
    assert any("architecture of org/x not checked" in w for w in p.warnings)


# Rule 12: EAGLE drafts must carry lm_head.weight.
def test_rule12_eagle_draft() -> None:
    spec = '{"method": "eagle", "model": "/draft", "num_speculative_tokens": 4}'
    ok = llama_facts(paths={"/draft": ModelFacts("dir", LLAMA, None, True)})
    assert (
        json.loads(flag(llama_plan({"SM_VLLM_SPECULATIVE_CONFIG": spec}, ok), "--speculative-config"))[
            "model"
        ]
        == "/draft"
    )
    bad = llama_facts(paths={"/draft": ModelFacts("dir", LLAMA, None, False)})
    assert "lm_head.weight" in llama_refused({"SM_VLLM_SPECULATIVE_CONFIG": spec}, bad)


# Rule 13: global_topk within the device's 256 (the config's own top_k is only its static default).
def test_rule13_top_k() -> None:
    llama_plan({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"top_k": 500, "global_topk": 256}'})
    capped = llama_plan({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"global_topk": 512}'})  # the plugin caps it
    assert any("global_topk=512 is above 256" in w for w in capped.warnings)


# dtype explicit; auto refused.
def test_dtype_explicit() -> None:
    assert flag(llama_plan({}), "--dtype") == "bfloat16"
    assert flag(llama_plan({"OPTION_DTYPE": "fp16"}), "--dtype") == "float16"
    assert "SM_VLLM_DTYPE=bfloat16" in llama_refused({"SM_VLLM_DTYPE": "auto"})


def test_extra_args_cannot_replace_override() -> None:
    assert "SM_VLLM_ADDITIONAL_CONFIG" in llama_refused({}, extra=["--additional-config", "{}"])


def test_extra_args_are_checked_too() -> None:
    env = {k: v for k, v in LLAMA_ENV.items() if k != "SM_VLLM_TENSOR_PARALLEL_SIZE"}
    with pytest.raises(ConfigError) as err:
        build_plan(parse_settings(env, extra_args=["--tensor-parallel-size", "8"]), llama_facts(2))
    assert "-- --tensor-parallel-size=2" in str(err.value)
    p = build_plan(parse_settings(env, extra_args=["--tensor-parallel-size=2"]), llama_facts(2))
    # Passed once, as the plan resolved it (the tail no longer repeats a flag the plan renders).
    assert flag(p, "--tensor-parallel-size") == "2" and "--tensor-parallel-size=2" not in p.argv
    p = build_plan(parse_settings(env, extra_args=["--tensor-parallel-size", "max"]), llama_facts(2))
    assert p.argv.count("--tensor-parallel-size") == 1 and "max" not in p.argv  # vLLM cannot parse max
    conflict = llama_refused({}, extra=["--max-model-len", "4096"])
    assert "SM_VLLM_MAX_MODEL_LEN" in conflict and "-- --max-model-len" in conflict


def test_logical_nc_config_goes_into_override() -> None:
    p = llama_plan({"NEURON_LOGICAL_NC_CONFIG": "2"})
    assert additional(p)["override_neuron_config"] == {"logical_nc_config": 2}
    assert "NEURON_LOGICAL_NC_CONFIG" in llama_refused(
        {"NEURON_LOGICAL_NC_CONFIG": "2", "SM_NEURON_LOGICAL_NC_CONFIG": "1"}
    )
