"""Llama 4 and Pixtral on vllm-neuron 0.2.2+lts: the nested override, and what the nested loader refuses.

Each rule both ways: the configuration the plugin's source rejects is refused (or rendered where it
loads), and its neighbour (the same on a text model, or inside the limit) plans.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.support.builders import LLAMA, LLAMA_ENV, additional, llama_facts, llama_plan, llama_refusal, plan

from neuronserve.plan.facts import ModelFacts
from neuronserve.plan.lanes.nxdi import multimodal
from neuronserve.types import LaunchPlan

TEXT = {"num_key_value_heads": 8, "head_dim": 128}
LLAMA4 = {"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"], "text_config": TEXT}
PIXTRAL = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"], "text_config": TEXT}
PREFIX = {"SM_VLLM_ENABLE_PREFIX_CACHING": "true"}


# An image whose NxD Inference has pixtral (its registry is read there: plan/lanes/nxdi/models.py); lane
# 2.27's assumed NxD Inference 0.7.14366 has none, so Pixtral on 2.27 is planned against this one.
WITH_PIXTRAL = {k: ("causal-lm",) for k in ("llama", "llama4", "mllama", "pixtral", "qwen2", "qwen3")}


def mm_facts(config: dict[str, Any], **facts: Any) -> Any:
    return llama_facts(2, config, **{"nxdi_models": WITH_PIXTRAL, **facts})


def on(config: dict[str, Any], env: dict[str, str], **facts: Any) -> LaunchPlan:
    return llama_plan(env, mm_facts(config, **facts))


def override(p: LaunchPlan) -> dict[str, Any]:
    doc = additional(p)["override_neuron_config"]
    assert isinstance(doc, dict)
    return doc


QWEN_TEXT = {"num_key_value_heads": 4, "head_dim": 128}
QWEN2_VL = {"architectures": ["Qwen2VLForConditionalGeneration"], "text_config": QWEN_TEXT}
QWEN3_VL = {"architectures": ["Qwen3VLForConditionalGeneration"], "text_config": QWEN_TEXT}
LANE_2_28 = {"vllm": "0.13.0", "vllm-neuron": "0.4.1"}
# (config.json, the lane's versions) of each model NxD Inference builds without a block KV layout
CONTIGUOUS_ONLY = [
    pytest.param(LLAMA4, None, id="llama4-2.27"),
    pytest.param(PIXTRAL, None, id="pixtral-2.27"),
    pytest.param(LLAMA4, LANE_2_28, id="llama4-2.28"),
    pytest.param(PIXTRAL, LANE_2_28, id="pixtral-2.28"),
    pytest.param(QWEN2_VL, LANE_2_28, id="qwen2vl-2.28"),
    pytest.param(QWEN3_VL, LANE_2_28, id="qwen3vl-2.28"),
]
DRAFT = ModelFacts("dir", {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, "e" * 64, True)
EAGLE = {"SM_VLLM_SPECULATIVE_CONFIG": '{"method": "eagle", "model": "/draft", "num_speculative_tokens": 4}'}


def lane_facts(config: dict[str, Any], versions: dict[str, str] | None) -> Any:
    """Lane 2.28 (versions given) assumes its own NxD Inference, which has all four models."""
    if versions:
        return llama_facts(2, config, paths={"/draft": DRAFT}, versions=versions)
    return mm_facts(config, paths={"/draft": DRAFT})


@pytest.mark.parametrize(("config", "versions"), CONTIGUOUS_ONLY)
@pytest.mark.parametrize(
    ("env", "named"),
    [
        (PREFIX, "SM_VLLM_ENABLE_PREFIX_CACHING"),
        (
            {"SM_NEURON_OVERRIDE_CONFIG": '{"text_neuron_config": {"is_block_kv_layout": true}}'},
            "SM_NEURON_OVERRIDE_CONFIG",
        ),
    ],
)
def test_a_block_kv_layout_is_refused_for_a_model_nxd_inference_builds_contiguous(
    config: dict[str, Any], versions: dict[str, str] | None, env: dict[str, str], named: str
) -> None:
    """Before, Llama 4 / Pixtral with prefix caching planned with the keys nested under text_neuron_config
    (and a test asserted that), but NxD Inference's model raises "does not yet support block_kv_layout"
    when it is built (models/llama4/modeling_llama4.py:94-97, models/pixtral/modeling_pixtral.py:50-53,
    qwen3_vl :76-79; Qwen2-VL turns it off with a warning, qwen2_vl :80-91): refused. The text model plans."""
    err = llama_refusal(env, lane_facts(config, versions))
    arch = config["architectures"][0]
    assert str(err).startswith(f"{named}: {arch} has no block KV layout in NxD Inference (models/")
    assert err.variables[0] == named
    assert override(on(LLAMA, PREFIX)) == {"is_block_kv_layout": True, "is_prefix_caching": True}


@pytest.mark.parametrize(("config", "versions"), CONTIGUOUS_ONLY)
def test_speculative_decoding_is_refused_for_a_model_without_fused_speculation(
    config: dict[str, Any], versions: dict[str, str] | None
) -> None:
    """The plugin turns on fused speculation for any speculative config (loader :787-794), and these
    models raise "does not yet support fused speculation" (modeling_llama4.py:102-103,
    modeling_pixtral.py:58-59, qwen3_vl :84-85; Qwen2-VL drops it with a warning): refused."""
    err = llama_refusal(EAGLE, lane_facts(config, versions))
    arch = config["architectures"][0]
    assert str(err).startswith(f"SM_VLLM_SPECULATIVE_CONFIG: {arch} has no fused speculation in NxD ")
    assert err.variables == ("SM_VLLM_SPECULATIVE_CONFIG",)
    llama_plan(EAGLE, lane_facts(LLAMA, versions))  # the text model plans


def test_generated_keys_are_nested_generically() -> None:
    """Every key the plan adds (here the LNC and the completed sampling config) is nested, not a list."""
    env = {
        "NEURON_LOGICAL_NC_CONFIG": "1",
        "SM_NEURON_OVERRIDE_CONFIG": json.dumps(
            {"text_neuron_config": {"enable_bucketing": False}, "vision_neuron_config": {"tp_degree": 2}}
        ),
    }
    assert override(on(LLAMA4, env)) == {
        "text_neuron_config": {"enable_bucketing": False, "logical_nc_config": 1},
        "vision_neuron_config": {"tp_degree": 2},
    }


def test_a_users_top_level_key_is_refused_with_where_it_belongs() -> None:
    err = llama_refusal({"SM_NEURON_ENABLE_BUCKETING": "false"}, llama_facts(2, LLAMA4))
    assert str(err) == (
        "SM_NEURON_ENABLE_BUCKETING sets enable_bucketing at the top level of override_neuron_config, "
        "but for Llama4ForConditionalGeneration vllm-neuron 0.2.2+lts accepts only text_neuron_config and "
        "vision_neuron_config there (it asserts so at load): set SM_NEURON_OVERRIDE_CONFIG="
        '\'{"text_neuron_config": {"enable_bucketing": false}}\' (or vision_neuron_config for the vision '
        "encoder) instead of SM_NEURON_ENABLE_BUCKETING"
    )
    assert err.variables == ("SM_NEURON_ENABLE_BUCKETING", "SM_NEURON_OVERRIDE_CONFIG")
    # the neighbours: the same key on a text model, and nested on Llama 4
    assert override(on(LLAMA, {"SM_NEURON_ENABLE_BUCKETING": "false"})) == {"enable_bucketing": False}
    nested = {"SM_NEURON_OVERRIDE_CONFIG": '{"text_neuron_config": {"enable_bucketing": false}}'}
    assert override(on(LLAMA4, nested)) == {"text_neuron_config": {"enable_bucketing": False}}


def test_a_nested_object_must_be_an_object() -> None:
    err = llama_refusal({"SM_NEURON_TEXT_NEURON_CONFIG": "[1]"}, mm_facts(PIXTRAL))
    assert str(err) == (
        "SM_NEURON_TEXT_NEURON_CONFIG: text_neuron_config must be a JSON object for "
        "LlavaForConditionalGeneration"
    )


def test_a_nested_key_that_contradicts_the_launch_is_refused() -> None:
    lnc = {"NEURON_LOGICAL_NC_CONFIG": "1"}
    bad = {**lnc, "SM_NEURON_OVERRIDE_CONFIG": '{"text_neuron_config": {"logical_nc_config": 2}}'}
    err = llama_refusal(bad, llama_facts(2, LLAMA4))
    assert str(err) == (
        "SM_NEURON_OVERRIDE_CONFIG: text_neuron_config sets logical_nc_config=2 but the launch needs "
        "logical_nc_config=1: remove logical_nc_config from text_neuron_config (the plan writes it there "
        "itself)"
    )
    agree = {**lnc, "SM_NEURON_OVERRIDE_CONFIG": '{"text_neuron_config": {"logical_nc_config": 1}}'}
    assert override(on(LLAMA4, agree))["text_neuron_config"]["logical_nc_config"] == 1


def test_keys_removed_before_the_loader_assertion_stay_at_the_top_level() -> None:
    """The runner pops the LoRA keys (runner :174-177) and the loader the quantization keys when
    `quantized` is given (loader :888-901) before :945-952 runs: they must stay where they are popped."""
    flat = {
        "lora_ckpt_json": "/x.json",
        "quantized": True,
        "quantization_dtype": "int8",
        "is_block_kv_layout": True,
    }
    model = ModelFacts("dir", LLAMA4)
    assert multimodal.nest(model, flat) == {
        "lora_ckpt_json": "/x.json",
        "quantized": True,
        "quantization_dtype": "int8",
        "text_neuron_config": {"is_block_kv_layout": True},
    }
    # without `quantized` the loader does not pop quantization_dtype: nested like any other key
    assert multimodal.nest(model, {"quantization_dtype": "int8"}) == {
        "text_neuron_config": {"quantization_dtype": "int8"}
    }
    assert multimodal.nest(ModelFacts("dir", LLAMA), flat) == flat
    quantized = {
        "SM_NEURON_QUANTIZED": "true",
        "SM_NEURON_QUANTIZATION_DTYPE": "int8",
        "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "/q",
    }
    assert override(on(LLAMA4, quantized)) == {
        "quantized": True,
        "quantization_dtype": "int8",
        "quantized_checkpoints_path": "/q",
        "text_neuron_config": {},
    }
    assert "SM_NEURON_QUANTIZATION_DTYPE sets quantization_dtype at the top level" in str(
        llama_refusal({"SM_NEURON_QUANTIZATION_DTYPE": "int8"}, llama_facts(2, LLAMA4))
    )


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("SM_NEURON_QUANTIZATION_DTYPE", "int8"),
        ("SM_NEURON_QUANTIZATION_TYPE", "per_channel_symmetric"),
        ("SM_NEURON_QUANTIZED_CHECKPOINTS_PATH", "s3://bkt/q/"),
    ],
)
def test_a_quantization_key_without_quantized_points_to_sm_neuron_quantized(var: str, value: str) -> None:
    """The fix is SM_NEURON_QUANTIZED=true (the loader then pops the keys before its assertion), not
    nesting them: nested, the checkpoint path would not be staged (the message showed the staged path)."""
    err = llama_refusal({var: value}, llama_facts(2, LLAMA4))
    assert "set SM_NEURON_QUANTIZED=true with it" in str(err) and 'text_neuron_config": {' not in str(err)
    assert err.variables == (var, "SM_NEURON_QUANTIZED")
    key = var[len("SM_NEURON_") :].lower()
    quantized = {var: value, "SM_NEURON_QUANTIZED": "true", "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "/q"}
    assert key in override(on(LLAMA4, {**quantized, var: value}))  # top level: popped


def test_chunked_prefill_cannot_load_for_a_multimodal_model() -> None:
    chunked = {
        "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
        "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512",
    }
    err = llama_refusal(chunked, llama_facts(2, LLAMA4))
    assert str(err).startswith("SM_VLLM_ENABLE_CHUNKED_PREFILL=true: chunked prefill cannot load for ")
    assert err.variables == ("SM_VLLM_ENABLE_CHUNKED_PREFILL",)
    text = {**chunked, "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 4}'}
    assert "chunked_prefill_config" in override(on(LLAMA, text))


def test_max_prompt_length_is_refused_for_a_multimodal_model() -> None:
    env = {"SM_VLLM_ADDITIONAL_CONFIG": '{"max_prompt_length": 1024}'}
    err = llama_refusal(env, mm_facts(PIXTRAL))
    assert "remove max_prompt_length" in str(err) and err.variables == ("SM_VLLM_ADDITIONAL_CONFIG",)
    assert additional(on(LLAMA, env))["max_prompt_length"] == 1024


@pytest.mark.parametrize("seqs", ["1", "4"])
def test_pixtral_plans_up_to_batch_4(seqs: str) -> None:
    p = on(PIXTRAL, {"SM_VLLM_MAX_NUM_SEQS": seqs})
    assert p.argv[p.argv.index("--max-num-seqs") + 1] == seqs
    assert set(override(p)) == {"text_neuron_config"}


def test_pixtral_without_a_batch_size_defaults_to_its_cap() -> None:
    """The plan's default 8 was refused as `SM_VLLM_MAX_NUM_SEQS=8`, a variable the user never set."""
    unset = {k: v for k, v in LLAMA_ENV.items() if k != "SM_VLLM_MAX_NUM_SEQS"}
    p = plan(unset, mm_facts(PIXTRAL))
    assert p.argv[p.argv.index("--max-num-seqs") + 1] == "4"
    assert "max_num_seqs defaulted to 4 (the compiled batch size): set SM_VLLM_MAX_NUM_SEQS" in p.warnings
    q = plan(unset, llama_facts(2, LLAMA4))  # no cap: the plan's default
    assert q.argv[q.argv.index("--max-num-seqs") + 1] == "8"


def test_pixtral_above_batch_4_is_refused_naming_the_variable() -> None:
    err = llama_refusal({"SM_VLLM_MAX_NUM_SEQS": "5"}, mm_facts(PIXTRAL))
    assert str(err) == (
        "SM_VLLM_MAX_NUM_SEQS=5: vllm-neuron 0.2.2+lts raises for Pixtral (LlavaForConditionalGeneration) "
        "above batch 4: set SM_VLLM_MAX_NUM_SEQS=4 or fewer"
    )
    assert err.variables == ("SM_VLLM_MAX_NUM_SEQS",)
    assert "OPTION_MAX_ROLLING_BATCH_SIZE=8" in str(
        llama_refusal({"SM_VLLM_MAX_NUM_SEQS": "", "OPTION_MAX_ROLLING_BATCH_SIZE": "8"}, mm_facts(PIXTRAL))
    )
    # Llama 4 has no such limit
    on(LLAMA4, {"SM_VLLM_MAX_NUM_SEQS": "8"})


def test_pixtral_is_refused_before_vllm_neuron_0_2_2() -> None:
    old = mm_facts(PIXTRAL, versions={"vllm": "0.11.0", "vllm-neuron": "0.2.0"})
    assert "does not run on vllm-neuron 0.2.0" in str(llama_refusal({}, old))


def test_pixtral_above_10240_tokens_is_refused_with_the_estimate_override() -> None:
    long = {"SM_VLLM_MAX_MODEL_LEN": "10272", "SM_VLLM_MAX_NUM_SEQS": "1"}
    err = llama_refusal(long, mm_facts(PIXTRAL))
    assert str(err) == (
        "SM_VLLM_MAX_MODEL_LEN=10272: Pixtral on Neuron is documented up to 10240 tokens (vllm-neuron's "
        "README; an estimate, not a check of its source): set SM_VLLM_MAX_MODEL_LEN=10240 or fewer, or "
        "NEURONSERVE_FIT_CHECK=warn to try it anyway"
    )
    assert err.variables == ("SM_VLLM_MAX_MODEL_LEN", "NEURONSERVE_FIT_CHECK")
    on(PIXTRAL, {**long, "SM_VLLM_MAX_MODEL_LEN": "10240"})
    warned = on(PIXTRAL, {**long, "NEURONSERVE_FIT_CHECK": "warn"})
    assert str(err) + " (NEURONSERVE_FIT_CHECK=warn: not refused)" in warned.warnings
    off = on(PIXTRAL, {**long, "NEURONSERVE_FIT_CHECK": "off"})
    assert not [w for w in off.warnings if "10240" in w]
    on(LLAMA4, long)  # the limit is Pixtral's
