"""HBM per NeuronCore: weights shard + KV cache shard + a fixed overhead, from config.json alone. Pure.

How NxD Inference 0.7 (v0.7.14366, the SDK 2.27 release) lays a decoder out over tensor parallelism:

- Attention heads are padded up to a multiple of TP (modules/attention/gqa.py:100-120, via
  neuronx_distributed's get_number_of_extra_heads), so every core holds ceil(heads / TP) query heads
  and their share of o_proj. vllm-neuron 0.2.2+lts replaces vLLM's "heads divisible by TP" check
  (platform.py:108 installs platform_overrides.py:16-38), so any TP is accepted.
- KV heads (gqa.py:84-97 and 100-120): when KV heads < TP or do not divide by TP, they are replicated
  up to TP (one KV head per core) if TP is a multiple of them, else the model is converted to MHA
  (KV heads = padded attention heads). The KV cache manager sizes each core's cache with that count
  (modules/kvcache/kv_cache_manager.py:162-182, shape at 190-230).
- MLP, experts, embeddings and lm_head are column/row-parallel with padding (models/llama/
  modeling_llama.py:389-417, 1344-1364): ceil(dim / TP) per core. A tied lm_head is still a separate
  device tensor: NxD copies embed_tokens into lm_head (modeling_llama.py:1503-1504).
- KV cache tokens: the contiguous cache (prefix caching off) is max_num_seqs x max_model_len
  (kv_cache_manager.py:190-230; the plugin sets block_size = max_model_len, platform.py:275-278).
  The block layout is pa_num_blocks x block_size, plus 1 reserved block with prefix caching (modules/
  kvcache/block_kv_cache_manager.py:21, 62-87), and the plugin adds 1 null block to
  --num-gpu-blocks-override (platform.py:220-229), so N requested blocks cost N + 2 with prefix
  caching and N + 1 for chunked prefill.

The overhead (runtime reservation, compiled graphs' I/O and scratch buffers, sampling buffers) has no
published formula (vllm-neuron caps a cache fraction instead): neuronserve assumes a fixed
DEFAULT_OVERHEAD_BYTES per core, which NEURONSERVE_HBM_OVERHEAD_GIB replaces (docs/FIT.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from neuronserve.plan.facts import json_int
from neuronserve.plan.fit.instances import GIB

DEFAULT_OVERHEAD_BYTES = 3 * GIB // 2  # 1.5 GiB per NeuronCore: see the module docstring and docs/FIT.md
WARN_UTILIZATION = 0.90
DTYPE_BYTES = {
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "auto": 4,  # `auto` compiles float32 on Neuron (plan/lanes/nxdi/rules.py check_dtype)
}


class ShapeError(ValueError):
    """config.json lacks a field the estimate needs (the message names it)."""


@dataclass(frozen=True)
class ModelShape:
    """The architecture numbers of a decoder-only model (HF config.json names)."""

    vocab: int
    hidden: int
    layers: int
    intermediate: int  # dense MLP width, or one expert's width for MoE
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool
    experts: int = 0  # 0 = dense
    experts_per_token: int = 0
    qkv_bias: bool = False
    qk_norm: bool = False  # Qwen3: an RMSNorm on each query and key head (head_dim weights each)
    max_position_embeddings: int | None = None

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _get(cfg: dict[str, Any], *names: str) -> Any:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return value
    return None


# Read when present (null or 0 = absent): a value that is no count is refused like a missing field, not
# turned into a crash (int("x")) or a nonsense estimate (-8 KV heads).
OPTIONAL_COUNTS = (
    "num_key_value_heads",
    "head_dim",
    "num_local_experts",
    "num_experts",
    "num_experts_per_tok",
    "max_position_embeddings",
)


def model_shape(config: dict[str, Any]) -> ModelShape:
    """Read the numbers from config.json (text_config for multimodal wrappers); ShapeError if missing."""
    cfg = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    assert isinstance(cfg, dict)
    need = {
        "vocab_size": _get(cfg, "vocab_size") or _get(config, "vocab_size"),
        "hidden_size": _get(cfg, "hidden_size"),
        "num_hidden_layers": _get(cfg, "num_hidden_layers"),
        "intermediate_size": _get(cfg, "moe_intermediate_size", "intermediate_size"),
        "num_attention_heads": _get(cfg, "num_attention_heads"),
    }
    missing = [k for k, v in need.items() if not json_int(v) or v <= 0]
    if missing:
        raise ShapeError(f"config.json has no {', '.join(missing)}")
    for name in OPTIONAL_COUNTS:
        value = cfg.get(name)
        if value is not None and (not json_int(value) or value < 0):
            raise ShapeError(f"config.json has {name} = {json.dumps(value)}, not a count")
    heads = int(need["num_attention_heads"])
    experts = _get(cfg, "num_local_experts", "num_experts") or 0
    return ModelShape(
        vocab=int(need["vocab_size"]),
        hidden=int(need["hidden_size"]),
        layers=int(need["num_hidden_layers"]),
        intermediate=int(need["intermediate_size"]),
        heads=heads,
        kv_heads=int(_get(cfg, "num_key_value_heads") or heads),
        head_dim=int(_get(cfg, "head_dim") or need["hidden_size"] // heads),
        tied=bool(_get(cfg, "tie_word_embeddings") or _get(config, "tie_word_embeddings") or False),
        experts=int(experts),
        experts_per_token=int(_get(cfg, "num_experts_per_tok") or 0),
        qkv_bias=bool(cfg.get("attention_bias")) or cfg.get("model_type") == "qwen2",
        qk_norm=cfg.get("model_type") in ("qwen3", "qwen3_moe"),
        max_position_embeddings=_get(cfg, "max_position_embeddings"),
    )


def kv_heads_per_core(shape: ModelShape, tp: int) -> int:
    """gqa.py:84-120 + kv_cache_manager.py:162-182 (see the module docstring)."""
    q_padded = math.ceil(shape.heads / tp) * tp
    if shape.kv_heads == shape.heads:
        return q_padded // tp
    if shape.kv_heads < tp or shape.kv_heads % tp:
        if tp % shape.kv_heads == 0:
            return 1  # REPLICATE_TO_TP_DEGREE
        return q_padded // tp  # CONVERT_TO_MHA
    return shape.kv_heads // tp


@dataclass(frozen=True)
class WeightLayout:
    """Elements per core: `linear` (quantizable projections) and `other` (embeddings, lm_head, norms)."""

    linear: int
    other: int
    expert_linear: int  # the part of `linear` that belongs to experts (read only when routed to)


def weight_layout(shape: ModelShape, tp: int) -> WeightLayout:
    h, d = shape.hidden, shape.head_dim
    q = math.ceil(shape.heads / tp) * d
    kv = kv_heads_per_core(shape, tp) * d
    attn = h * q * 2 + h * kv * 2
    mlp_width = math.ceil(shape.intermediate / tp)
    if shape.experts:
        experts = shape.experts * 3 * h * mlp_width
        mlp, router = experts, shape.experts * h
    else:
        experts, mlp, router = 0, 3 * h * mlp_width, 0
    bias = (q + 2 * kv) if shape.qkv_bias else 0
    per_layer_other = 2 * h + router + bias + (2 * d if shape.qk_norm else 0)
    vocab = math.ceil(shape.vocab / tp) * h
    return WeightLayout(
        linear=shape.layers * (attn + mlp),
        other=shape.layers * per_layer_other + 2 * vocab + h,
        expert_linear=shape.layers * experts,
    )


def hf_parameter_count(shape: ModelShape) -> int:
    """The checkpoint's own count (TP 1, lm_head only when untied): to compare with safetensors headers."""
    layout = weight_layout(shape, 1)
    return layout.linear + layout.other - (shape.vocab * shape.hidden if shape.tied else 0)


@dataclass(frozen=True)
class Precision:
    dtype_bytes: int  # weights outside the quantized projections, and the KV cache
    linear_bytes: int  # quantized projections: 1 byte (int8 / fp8), else dtype_bytes


def weights_bytes_per_core(
    shape: ModelShape, tp: int, precision: Precision, checkpoint_params: int | None = None
) -> int:
    """The layout's bytes per core; scaled by the checkpoint's true parameter count when known (the
    layout says how things shard, the safetensors headers say how many there are)."""
    layout = weight_layout(shape, tp)
    total = layout.linear * precision.linear_bytes + layout.other * precision.dtype_bytes
    if checkpoint_params:
        total = round(total * checkpoint_params / hf_parameter_count(shape))
    return total


def block_tokens(num_blocks: int, block_size: int, prefix: bool) -> int:
    """Tokens the block layout allocates for `--num-gpu-blocks-override N`: the plugin adds a null block
    (pa_num_blocks = N + 1) and, with prefix caching, NxD adds one reserved block to the cache shape
    (block_kv_cache_manager.py:21, 62-78); its chunked-prefill shape has none (80-87)."""
    return (num_blocks + 1 + (1 if prefix else 0)) * block_size


def kv_tokens(kv: dict[str, Any], max_num_seqs: int, max_model_len: int) -> int:
    """Tokens the compiled cache holds: contiguous = seqs x length; block layout = see block_tokens."""
    mode = kv.get("mode")
    if (
        mode in ("prefix", "block")
        and kv.get("block_size")
        and (kv.get("pa_num_blocks") or kv.get("num_blocks"))
    ):
        allocated = int(kv.get("pa_num_blocks") or int(kv["num_blocks"]) + 1)  # pa_num_blocks = N + 1
        return (allocated + (1 if mode == "prefix" else 0)) * int(kv["block_size"])
    if kv.get("kv_tokens"):
        return int(kv["kv_tokens"])
    return max_num_seqs * max_model_len


def kv_bytes_per_core(shape: ModelShape, tp: int, tokens: int, dtype_bytes: int) -> int:
    """layers x 2 (K and V) x KV heads per core x head_dim x tokens x bytes."""
    return shape.layers * 2 * kv_heads_per_core(shape, tp) * shape.head_dim * tokens * dtype_bytes


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes_per_core: int
    kv_bytes_per_core: int
    overhead_bytes_per_core: int
    hbm_bytes_per_core: int

    @property
    def total(self) -> int:
        return self.weights_bytes_per_core + self.kv_bytes_per_core + self.overhead_bytes_per_core

    @property
    def utilization(self) -> float:
        return self.total / self.hbm_bytes_per_core

    @property
    def fits(self) -> bool:
        return self.total <= self.hbm_bytes_per_core

    def as_json(self) -> dict[str, Any]:
        return {
            "weights_bytes_per_core": self.weights_bytes_per_core,
            "kv_bytes_per_core": self.kv_bytes_per_core,
            "overhead_bytes_per_core": self.overhead_bytes_per_core,
            "hbm_bytes_per_core": self.hbm_bytes_per_core,
            "utilization": round(self.utilization, 4),
            "fits": self.fits,
        }

    def describe(self) -> str:
        g = GIB
        return (
            f"{self.total / g:.2f} GiB per NeuronCore (weights {self.weights_bytes_per_core / g:.2f} + "
            f"KV cache {self.kv_bytes_per_core / g:.2f} + overhead {self.overhead_bytes_per_core / g:.2f}) "
            f"of {self.hbm_bytes_per_core / g:.2f} GiB HBM = {100 * self.utilization:.0f} %"
        )


@dataclass(frozen=True)
class Model:
    """One model to place: its shape, optional checkpoint count, and its precision."""

    shape: ModelShape
    precision: Precision
    checkpoint_params: int | None = None


def estimate(
    models: list[Model], tp: int, tokens: int, hbm_bytes_per_core: int, overhead_bytes_per_core: int
) -> MemoryEstimate:
    """Target and speculative drafts share the cores and the token count (fused speculation)."""
    weights = sum(weights_bytes_per_core(m.shape, tp, m.precision, m.checkpoint_params) for m in models)
    kv = sum(kv_bytes_per_core(m.shape, tp, tokens, m.precision.dtype_bytes) for m in models)
    return MemoryEstimate(weights, kv, overhead_bytes_per_core, hbm_bytes_per_core)
