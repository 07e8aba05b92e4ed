"""The HBM estimate's edge cases mutation testing found unchecked (plan/fit/memory.py, docs/TESTING.md):
config.json shapes the six test models do not have (a multimodal wrapper's text_config, Qwen3-MoE's keys, a
bias flag, fields at their validity boundary), the block layout's token count, the kv record's fallbacks,
numbers that must stay JSON integers, and the exact sentence an HBM refusal shows.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.support.builders import OVERHEAD, SIZED_VERSIONS, model_config, sized_plan, sized_refused
from tests.unit.plan.fit.test_memory import GIB

from neuronserve.config.settings import parse_settings
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import memory

# Qwen3-30B-A3B's config.json (the fields the estimate reads): MoE keys spelled the Qwen way.
QWEN3_MOE: dict[str, Any] = {
    "model_type": "qwen3_moe",
    "vocab_size": 151936,
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
}

# Mistral-Small-3.1-24B's text part: head_dim 128 although hidden / heads = 160.
MISTRAL_TEXT: dict[str, Any] = {
    "model_type": "mistral",
    "vocab_size": 131072,
    "hidden_size": 5120,
    "num_hidden_layers": 40,
    "intermediate_size": 32768,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 131072,
}
MISTRAL_SHAPE = memory.ModelShape(
    vocab=131072,
    hidden=5120,
    layers=40,
    intermediate=32768,
    heads=32,
    kv_heads=8,
    head_dim=128,
    tied=False,
    max_position_embeddings=131072,
)


def test_qwen3_moe_shape_and_its_published_parameter_count() -> None:
    """Qwen3-MoE names its expert count `num_experts` (not Mixtral's num_local_experts) and its expert
    width `moe_intermediate_size` (intermediate_size is the unused dense width); model_type qwen3_moe has
    the q/k norms. With all of them read, the count is the model card's 30,532,122,624 parameters."""
    shape = memory.model_shape(QWEN3_MOE)
    assert shape == memory.ModelShape(
        vocab=151936,
        hidden=2048,
        layers=48,
        intermediate=768,
        heads=32,
        kv_heads=4,
        head_dim=128,
        tied=False,
        experts=128,
        experts_per_token=8,
        qk_norm=True,
        max_position_embeddings=40960,
    )
    assert memory.hf_parameter_count(shape) == 30_532_122_624


def test_mixtral_and_llama_shapes_carry_routing_and_position_limit() -> None:
    """experts_per_token (the decode estimate's routed share) and max_position_embeddings (plan
    --recommend's longest length) come from config.json: 2 of 8 and 32768 for Mixtral, 0 and 131072 for
    the dense Llama-3.1-8B (0 means no routing, not one expert)."""
    mixtral = memory.model_shape(model_config("Mixtral-8x7B-v0.1"))
    assert (mixtral.experts, mixtral.experts_per_token, mixtral.max_position_embeddings) == (8, 2, 32768)
    llama = memory.model_shape(model_config("Llama-3.1-8B"))
    assert (llama.experts, llama.experts_per_token, llama.max_position_embeddings) == (0, 0, 131072)


def test_a_multimodal_wrapper_is_read_from_its_text_config() -> None:
    """Mistral3-style config.json: every text number (vocab_size too) lives in text_config, the top level
    has none. The shape is the text model's, and head_dim is the declared 128, not hidden / heads = 160."""
    wrapper = {"model_type": "mistral3", "text_config": MISTRAL_TEXT, "vision_config": {"hidden_size": 1024}}
    assert memory.model_shape(wrapper) == MISTRAL_SHAPE


def test_a_wrapper_vocab_and_tie_at_the_top_level_are_used() -> None:
    """Llava-style config.json: vocab_size and tie_word_embeddings at the top level, not in text_config.
    Both are read from there; the tie drops the lm_head from the checkpoint count (vocab x hidden)."""
    text = {k: v for k, v in MISTRAL_TEXT.items() if k != "vocab_size"}
    wrapper = {"text_config": text, "vocab_size": 131072, "tie_word_embeddings": True}
    shape = memory.model_shape(wrapper)
    assert shape.vocab == 131072 and shape.tied is True
    untied = memory.hf_parameter_count(MISTRAL_SHAPE)
    assert memory.hf_parameter_count(shape) == untied - 131072 * 5120


def test_a_wrapper_tie_in_text_config_is_used() -> None:
    """tie_word_embeddings inside text_config (none at the top level) ties the embeddings too."""
    wrapper = {"text_config": {**MISTRAL_TEXT, "tie_word_embeddings": True}}
    assert memory.model_shape(wrapper).tied is True


def test_text_config_vocab_wins_over_the_top_level() -> None:
    """When both levels name a vocab_size, the text model's (text_config) is the one its embedding has."""
    wrapper = {"text_config": MISTRAL_TEXT, "vocab_size": 32000}
    assert memory.model_shape(wrapper).vocab == 131072


def test_attention_bias_adds_the_qkv_bias_to_the_count() -> None:
    """`attention_bias: true` (any model_type, not only qwen2) adds q + k + v biases per layer:
    Llama-3.1-8B gets 32 x (4096 + 2 x 1024) = 196,608 more parameters."""
    biased = memory.model_shape({**model_config("Llama-3.1-8B"), "attention_bias": True})
    assert biased.qkv_bias is True
    assert memory.hf_parameter_count(biased) == 8_030_261_248 + 196_608


GOOD = {
    "vocab_size": 32000,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "num_attention_heads": 4,
}


def test_a_one_layer_model_is_accepted_and_zero_is_missing() -> None:
    """1 is the smallest valid shape number (a one-layer test model); 0 is no number at all."""
    assert memory.model_shape({**GOOD, "num_hidden_layers": 1}).layers == 1
    with pytest.raises(memory.ShapeError, match=r"^config.json has no vocab_size$"):
        memory.model_shape({**GOOD, "vocab_size": 0})


def test_every_missing_field_is_named_in_one_message() -> None:
    """Two missing fields: one refusal naming both, comma-separated, in config order."""
    cfg = {k: v for k, v in GOOD.items() if k not in ("hidden_size", "num_hidden_layers")}
    with pytest.raises(memory.ShapeError) as err:
        memory.model_shape(cfg)
    assert str(err.value) == "config.json has no hidden_size, num_hidden_layers"


def test_kv_heads_when_kv_heads_exceed_tp_but_do_not_divide() -> None:
    """8 KV heads at TP 6 (valid on inf2.48xlarge): 8 % 6 != 0 and 6 % 8 != 0, so NxD converts to MHA:
    32 query heads padded to 36, 6 KV heads per core, not 8 // 6 = 1."""
    shape = memory.model_shape(model_config("Llama-3.1-8B"))
    assert memory.kv_heads_per_core(shape, 6) == 6


def test_dense_weight_layout_has_no_expert_part() -> None:
    """Llama-3.1-8B at TP 2 (numbers of the first half): attention + MLP 3,489,660,928 elements,
    embeddings + norms 525,602,816, and no expert elements (the decode estimate reads all of `linear`)."""
    layout = memory.weight_layout(memory.model_shape(model_config("Llama-3.1-8B")), 2)
    assert layout == memory.WeightLayout(linear=3_489_660_928, other=525_602_816, expert_linear=0)


@pytest.mark.parametrize(
    ("prefix", "tokens"),
    [
        (True, 16448),  # 512 + null block + NxD's reserved block = 514 x 32
        (False, 16416),  # chunked prefill: 512 + null block = 513 x 32
    ],
)
def test_block_tokens(prefix: bool, tokens: int) -> None:
    """`--num-gpu-blocks-override 512` with 32-token blocks: the tokens the suggestions size KV with."""
    assert memory.block_tokens(512, 32, prefix) == tokens


@pytest.mark.parametrize(
    ("kv", "tokens"),
    [
        # The block count as allocated alone (no flag count): 513 x 32 + the reserved block.
        ({"mode": "prefix", "block_size": 32, "pa_num_blocks": 513}, 16448),
        # A recorded token capacity wins over seqs x length.
        ({"mode": "contiguous", "kv_tokens": 8192}, 8192),
        # No record at all: seqs x length = 4 x 4096.
        ({"mode": "contiguous"}, 16384),
        # An incomplete block record (no block size / no count) falls back to its kv_tokens.
        ({"mode": "block", "kv_tokens": 8192}, 8192),
        # Block counts on a contiguous record are not read: the mode decides the layout.
        ({"mode": "contiguous", "num_blocks": 512, "block_size": 32, "kv_tokens": 8192}, 8192),
    ],
)
def test_kv_tokens_fallbacks(kv: dict[str, object], tokens: int) -> None:
    """kv_tokens(kv, max_num_seqs=4, max_model_len=4096) for records beyond the plan's usual ones."""
    assert memory.kv_tokens(kv, 4, 4096) == tokens


@pytest.mark.parametrize(
    ("kv_heads", "tp", "kv_bytes"),
    [
        (8, 2, 1_073_741_824),  # 4 per core: 32 x 2 x 4 x 128 x 16384 x 2
        (8, 12, 805_306_368),  # converted to MHA: 36 heads / 12 = 3 per core
        (32, 2, 4_294_967_296),  # MHA: 16 per core
    ],
)
def test_estimate_bytes_are_json_integers(kv_heads: int, tp: int, kv_bytes: int) -> None:
    """The estimate is printed as JSON (`plan --json`, the manifest): byte counts are integers there,
    `1073741824`, never `1073741824.0`, in every KV-head layout."""
    shape = memory.model_shape({**model_config("Llama-3.1-8B"), "num_key_value_heads": kv_heads})
    model = memory.Model(shape, memory.Precision(2, 2))
    doc = json.dumps(memory.estimate([model], tp, 16384, 16 * GIB, OVERHEAD).as_json())
    assert f'"kv_bytes_per_core": {kv_bytes},' in doc


def test_plan_memory_json_has_integer_bytes() -> None:
    """The plan's own memory block (Llama-3.1-8B, TP 2, 4 x 4096) serializes its bytes as integers."""
    p = sized_plan("Llama-3.1-8B", "ml.inf2.xlarge", 2, 4096, 4)
    assert '"kv_bytes_per_core": 1073741824,' in json.dumps(p.memory)


def test_the_refusal_states_the_whole_estimate() -> None:
    """The refusal's estimate sentence, every number of it: total 24.98 GiB (7.48 + 16.00 + 1.50) of a
    16 GiB core = 156 % (Llama-3.1-8B, TP 2, 32 x 8192 tokens on inf2.xlarge)."""
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 8192, 32)
    assert (
        "24.98 GiB per NeuronCore (weights 7.48 + KV cache 16.00 + overhead 1.50) of 16.00 GiB HBM = 156 %"
        in msg
    )


def test_describe_rounds_the_percentage() -> None:
    """describe() on round numbers: 8 GiB used of 16 = 50 %."""
    est = memory.MemoryEstimate(4 * GIB, 3 * GIB, GIB, 16 * GIB)
    assert est.describe() == (
        "8.00 GiB per NeuronCore (weights 4.00 + KV cache 3.00 + overhead 1.00) of 16.00 GiB HBM = 50 %"
    )


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("num_key_value_heads", "x", '"x"'),  # was a bare ValueError from int("x"): a traceback
        ("num_key_value_heads", -8, "-8"),  # was accepted: a KV cache of 16 heads per core out of nothing
        ("head_dim", "128", '"128"'),
        ("num_experts_per_tok", True, "true"),
        ("max_position_embeddings", 4096.5, "4096.5"),
    ],
)
def test_an_optional_count_that_is_no_count_is_refused_by_name(key: str, value: object, shown: str) -> None:
    """An optional config.json number (used when present) that is no count is a ShapeError naming the key
    and the value as written, so the plan says "HBM fit not checked: ..." instead of crashing or
    estimating with nonsense (a bug mutation testing found in plan/fit/memory.py)."""
    with pytest.raises(memory.ShapeError) as err:
        memory.model_shape({**model_config("Llama-3.1-8B"), key: value})
    assert str(err.value) == f"config.json has {key} = {shown}, not a count"


def test_a_plan_with_a_broken_optional_count_is_made_without_the_fit_check() -> None:
    """Through build_plan: the plan is still made, with a warning that names the broken key; the estimate
    is skipped rather than the command failing with a Python traceback."""
    cfg = {**model_config("Llama-3.1-8B"), "num_key_value_heads": "eight"}
    facts = HostFacts(
        python="py", versions=dict(SIZED_VERSIONS), paths={"/m": ModelFacts("dir", cfg, "d" * 64)}
    )
    env = {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "SM_VLLM_MAX_MODEL_LEN": "4096",
        "NEURONSERVE_DEVICE": "neuron",
        "NEURONSERVE_INSTANCE_TYPE": "inf2.xlarge",
    }
    p = build_plan(parse_settings(env), facts)
    assert p.memory is None
    assert 'HBM fit not checked: config.json has num_key_value_heads = "eight", not a count' in p.warnings


def test_an_optional_count_of_zero_means_absent() -> None:
    """Dense configs that spell "no experts" as `num_experts: 0, num_experts_per_tok: 0` (and a 0 or null
    head_dim) are read as dense with the derived head_dim, not refused."""
    cfg = {**model_config("Llama-3.1-8B"), "num_experts": 0, "num_experts_per_tok": 0, "head_dim": 0}
    assert memory.model_shape(cfg) == memory.model_shape(model_config("Llama-3.1-8B"))
    assert memory.model_shape({**model_config("Llama-3.1-8B"), "head_dim": None}).head_dim == 128
