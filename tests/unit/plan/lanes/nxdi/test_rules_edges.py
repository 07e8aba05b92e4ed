"""The Neuron rules' edges mutation testing left unchecked (plan/lanes/nxdi/rules.py, docs/TESTING.md), in two
kinds of test: a plan built from the environment, where an override_neuron_config key given in
SM_VLLM_OVERRIDE_NEURON_CONFIG (not its own SM_NEURON_* variable) must be named as the variable to change;
and the rules called directly, for the boundaries of bucket lists, the "e.g." a bucket refusal suggests,
and the architecture checks; and the EAGLE draft check.
"""

from __future__ import annotations

from typing import Any

from tests.support.builders import llama_plan, raised, resolution
from tests.unit.plan.lanes.nxdi.test_models import ARCHS, arch
from tests.unit.plan.lanes.nxdi.test_rules import ORIGINS, buckets

from neuronserve.plan.facts import ModelFacts
from neuronserve.plan.lanes.nxdi import rules

OVERRIDE = "SM_VLLM_OVERRIDE_NEURON_CONFIG"


def test_a_bucket_of_one_is_a_positive_integer() -> None:
    """1 is the smallest bucket the refusal's own words ("positive integers") allow: it must pass, so the
    check is `> 0`, not `> 1`."""
    assert buckets({"context_encoding_buckets": [1, 2048], "token_generation_buckets": [1]}) == []


def test_a_too_big_bucket_suggests_every_bucket_that_fits_including_the_limit_itself() -> None:
    """The "e.g." keeps the buckets <= the limit: one equal to max_model_len is legal and stays in it."""
    err = raised(buckets, {"token_generation_buckets": [1024, 2048, 4096]})
    assert str(err) == (
        "SM_NEURON_TOKEN_GENERATION_BUCKETS: token_generation_buckets [4096] exceed max_model_len 2048: use "
        "buckets <= 2048 (e.g. [1024, 2048]) or raise SM_VLLM_MAX_MODEL_LEN"
    )


def test_context_buckets_over_a_configured_max_context_length_name_its_variable() -> None:
    """With SM_NEURON_MAX_CONTEXT_LENGTH set, the longest prefill is that value: a context bucket above it
    is refused naming SM_NEURON_MAX_CONTEXT_LENGTH as the one to raise, not max_num_batched_tokens."""
    env = {"SM_NEURON_MAX_CONTEXT_LENGTH": "512", "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[256, 1024]"}
    err = raised(llama_plan, env)
    assert (str(err), err.variables) == (
        "SM_NEURON_CONTEXT_ENCODING_BUCKETS: context_encoding_buckets [1024] exceed max_context_length (the "
        "longest prefill) 512: use buckets <= 512 (e.g. [256]) or raise SM_NEURON_MAX_CONTEXT_LENGTH",
        ("SM_NEURON_CONTEXT_ENCODING_BUCKETS", "SM_VLLM_MAX_MODEL_LEN"),
    )


def test_context_buckets_over_the_chunk_name_where_max_num_batched_tokens_was_set() -> None:
    """Without max_context_length, the limit is max_num_batched_tokens, named by the origin the caller
    gives for it (the SM_VLLM_* name is only the fallback when origins has none)."""
    origins = {**ORIGINS, "max-num-batched-tokens": "-- --max-num-batched-tokens"}
    err = raised(
        rules.check_buckets,
        length=2048,
        max_context=512,
        prefix=False,
        res=resolution(origins, override={"context_encoding_buckets": [1024]}),
    )
    assert str(err).endswith("use buckets <= 512 (e.g. [512]) or raise -- --max-num-batched-tokens")


def test_bucket_keys_from_the_override_json_are_named_by_that_variable() -> None:
    """A bucket list given inside SM_VLLM_OVERRIDE_NEURON_CONFIG is refused naming that variable (the one
    the user set), not an SM_NEURON_CONTEXT_ENCODING_BUCKETS they never used."""
    err = raised(llama_plan, {OVERRIDE: '{"context_encoding_buckets": [512, 4096]}'})
    assert (str(err), err.variables) == (
        f"{OVERRIDE}: context_encoding_buckets [4096] exceed max_model_len 2048: use buckets <= 2048 (e.g. "
        "[512]) or raise SM_VLLM_MAX_MODEL_LEN",
        (OVERRIDE, "SM_VLLM_MAX_MODEL_LEN"),
    )


def test_prefix_caching_context_buckets_from_the_override_json_are_named_by_that_variable() -> None:
    """The missing-prefix_buckets refusal names, twice, the variable that holds context_encoding_buckets."""
    env = {OVERRIDE: '{"context_encoding_buckets": [512, 2048]}', "SM_VLLM_ENABLE_PREFIX_CACHING": "true"}
    err = raised(llama_plan, env)
    assert (str(err), err.variables) == (
        f"{OVERRIDE}: with prefix caching, context_encoding_buckets need prefix_buckets too (NxD Inference "
        "builds a 2-D grid from both and fails with a TypeError without them): set SM_NEURON_PREFIX_BUCKETS "
        f"(e.g. [512, 2048]), or remove {OVERRIDE}",
        (OVERRIDE, "SM_NEURON_PREFIX_BUCKETS"),
    )


def test_chunked_prefill_config_from_the_override_json_is_named_by_that_variable() -> None:
    """chunked_prefill_config without chunked prefill: the refusal names where the key was set."""
    err = raised(llama_plan, {OVERRIDE: '{"chunked_prefill_config": {"max_num_seqs": 4}}'})
    assert (str(err), err.variables) == (
        f"{OVERRIDE} sets chunked_prefill_config but chunked prefill is off: set "
        "SM_VLLM_ENABLE_CHUNKED_PREFILL=true, or remove chunked_prefill_config",
        (OVERRIDE, "SM_VLLM_ENABLE_CHUNKED_PREFILL"),
    )


def test_pa_block_size_from_the_override_json_is_named_by_that_variable() -> None:
    """pa_block_size that differs from the block size: the refusal names where pa_block_size was set."""
    err = raised(llama_plan, {OVERRIDE: '{"pa_block_size": 16}', "SM_VLLM_ENABLE_PREFIX_CACHING": "true"})
    assert (str(err), err.variables) == (
        f"{OVERRIDE} sets pa_block_size=16 but the block size is 32: set SM_VLLM_BLOCK_SIZE=16 or remove "
        "pa_block_size",
        (OVERRIDE, "SM_VLLM_BLOCK_SIZE"),
    )


def test_sequence_parallel_from_the_override_json_is_named_by_that_variable() -> None:
    """sequence_parallel_enabled with a prefill bucket TP 2 does not divide: the refusal names where
    sequence_parallel_enabled was set, as the thing to remove."""
    err = raised(
        llama_plan, {OVERRIDE: '{"sequence_parallel_enabled": true, "context_encoding_buckets": [511, 1024]}'}
    )
    assert (str(err), err.variables) == (
        f"{OVERRIDE}: sequence parallelism needs every prefill bucket divisible by tensor_parallel_size 2, "
        "but [511] are not (buckets [511, 1024]): set SM_NEURON_CONTEXT_ENCODING_BUCKETS=[510, 1024] (and "
        f"SM_VLLM_MAX_MODEL_LEN a multiple of 2), or a TP that divides them, or remove {OVERRIDE}",
        (OVERRIDE, "SM_VLLM_MAX_MODEL_LEN"),
    )


def test_a_pixtral_architecture_gets_the_pixtral_refusal() -> None:
    """The plugin looks a Pixtral class up as "pixtral", which it cannot run: the refusal says
    Pixtral/LLaVA, as for LLaVA, rather than the generic "cannot be loaded"."""
    err = raised(arch, {"architectures": ["PixtralForConditionalGeneration"]})
    assert (str(err), err.variables) == (
        "/m: PixtralForConditionalGeneration (Pixtral/LLaVA) does not run on vllm-neuron 0.2.x (0.2.2+lts "
        f"runs Pixtral from a LlavaForConditionalGeneration checkpoint); choose a supported architecture "
        f"({ARCHS})",
        ("SM_VLLM_MODEL",),
    )


def test_only_gpt_oss_gets_the_gpt_oss_label() -> None:
    """The " GPT-OSS" label needs both "gpt" and "oss" in the class name: a GPT-NeoX model is refused
    without it."""
    err = raised(arch, {"architectures": ["GPTNeoXForCausalLM"]})
    assert str(err) == (
        "/m: architectures[0] GPTNeoXForCausalLM cannot be loaded by vllm-neuron 0.2.x (the plugin looks up "
        f"'gptneox'/'causal-lm' in NxD Inference): use a model whose config.json architectures[0] is one of "
        f"{ARCHS}"
    )


HEADS: dict[str, Any] = {"num_key_value_heads": 8, "head_dim": 128}


def test_multi_modal_heads_are_read_from_text_config() -> None:
    """Mllama keeps its heads in text_config (the plugin reads them there): heads only there pass
    without a warning, heads only at the top level are warned about."""
    mllama = ["MllamaForConditionalGeneration"]
    assert arch({"architectures": mllama, "text_config": HEADS}) == []
    assert arch({"architectures": mllama, **HEADS}) == [
        "/m: config.json has no num_key_value_heads / head_dim (or hidden_size and num_attention_heads); the "
        "plugin reads them before compiling and raises without them"
    ]


SPEC = "SM_VLLM_SPECULATIVE_CONFIG"


def eagle(spec: str | None, draft: ModelFacts | None) -> list[str]:
    """check_eagle's warnings for speculative config `spec` and the draft's facts."""
    res = resolution({"speculative-config": SPEC}, spec=spec)
    rules.check_eagle(draft, res)
    return res.warnings


def test_eagle_drafts() -> None:
    origin = SPEC
    assert eagle(None, None) == []
    assert eagle('{"method": "ngram"}', None) == []
    assert eagle('["eagle"]', None) == []
    assert eagle('{"method": "EAGLE", "model": "/d"}', ModelFacts(kind="dir", has_lm_head=True)) == []
    unchecked = [f"{origin}: could not check that the EAGLE draft /d carries lm_head.weight"]
    assert eagle('{"method": "eagle3", "model": "/d"}', None) == unchecked
    assert eagle('{"method": "eagle", "model": "/d"}', ModelFacts(kind="dir")) == unchecked
    err = raised(eagle, '{"method": "eagle", "model": "/d"}', ModelFacts(kind="dir", has_lm_head=False))
    assert (str(err), err.variables) == (
        f"{origin}: EAGLE draft /d has no lm_head.weight: copy the target model's lm_head.weight into the "
        "draft "
        "checkpoint",
        (origin,),
    )
    err = raised(eagle, "{not json", None)
    assert (str(err), err.variables) == (f"{origin} must be a JSON object", (origin,))
