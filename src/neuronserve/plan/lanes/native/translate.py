"""Lane 2.32: the same user settings in the rewritten vllm-neuron 0.24.0.1.1.0's form (pure).

The rewritten plugin (vLLM 0.24.0, Trn2/Trn3, no NxD Inference) takes
`--additional-config '{"neuron_config": {...}}'` with its own field names. A 2.27 user's override keys
(SM_NEURON_<KEY>, SM_NEURON_OVERRIDE_CONFIG, SM_VLLM_ADDITIONAL_CONFIG's override_neuron_config) are
NxD Inference names; ROWS maps each one this lane has an answer for, one row a key, citing the AWS doc
line that decides it. A row either lands the value under its 2.32 field, or refuses the key with the
lane's own name for it (a vLLM flag, a neuronserve variable, "always on"). A key in no row and not a
2.32 field is refused "not in this lane (2.32)". Nothing is dropped silently: the plugin's reaction to
an unknown neuron_config field is not documented, so the plan never finds out at compile time.

Sources (no plugin source is public), in aws-neuron/aws-neuron-sdk at the Neuron 2.32.0 release
(a3247f5b), under vllm-neuron/docs/, cited as page:line:
- guides/reference-configuration.md ("reference", dated 2026-08-13): the neuron_config fields (:46-51,
  :79, :115), vision_neuron_config and mm_language_model_only siblings (:14-16, :154-176), the KV
  options as vLLM flags (:57-66), the environment (:190-200).
- getting-started/migration-nxdi-to-vllm-neuron.md ("migration"): context_encoding_buckets ->
  num_batched_tokens_buckets (:99-106, :115-117), no --device / VLLM_NEURON_FRAMEWORK (:89-93,
  :113-114), the feature table (:43-54).
- guides/features-guide.md ("features"), design/vllm/structured-outputs-and-tool-calling.md
  ("structured"), design/vllm/additional-config.md ("additional").

What the docs do not settle (the plan's choice, said where it is made):
- The default sampling mode: reference:79 and additional:172 say on_device_sampling_config defaults to
  null (CPU sampling); features:424-426 and migration:50 say on-device sampling is on by default. The
  plan renders on_device_sampling_config explicitly (null unless the user gives a config), so the mode
  is the plan's, not a default nobody chose.
- Quantization: migration:49 names `quantized` + `quantization_dtype` in neuron_config; reference:115
  names only `quantization` (mxfp4, mxfp8) and says FP8 weights come from the checkpoint. The newer
  reference is followed: NxD Inference's quantized/quantization_dtype are refused with its name.
- The on-device sampling sub-keys: reference:79 lists temperature, top_k, top_p, all_greedy;
  additional:186-193 (older, 2026-06-23) says only temperature "0" works and others raise
  NotImplementedError. The plan accepts reference's four keys; a non-greedy config may still fail at
  startup on a plugin that matches the older page.
- token_generation_buckets: NxD Inference's decode buckets over sequence length; 2.32 buckets decode by
  num_seqs and adds decode_context_length_buckets as an opt-in context-length dimension (migration:54,
  reference:51) with its own max_model_len fallback always compiled (additional:146). The plan maps the
  NxD list onto it, dropping max_model_len itself (the fallback), and refuses values reference:51 forbids.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.facts import json_int
from neuronserve.plan.lanes.native.rules import FIELDS_0_29
from neuronserve.plan.resolution import Resolution

LANE = "2.32"
NOT_IN_LANE = f"not in this lane ({LANE})"
REF = "reference-configuration.md"
MIG = "migration-nxdi-to-vllm-neuron.md"
FEAT = "features-guide.md"

# neuron_config fields of 2.32 (reference:46-51, :79, :115), accepted as given under their own name.
FIELDS = frozenset(
    {
        "num_batched_tokens_buckets",
        "num_seqs_buckets",
        "kv_segment_size_buckets",
        "decode_context_length_buckets",
        "on_device_sampling_config",
        "quantization",
    }
)
# The neuron_config fields of each native lane, by lane id: a newer lane adds its documented list here.
# 2.33's page was read only in part (plan/lanes/native/rules.py): its fields read there plus 2.32's.
FIELDS_BY_LANE: dict[str, frozenset[str]] = {LANE: FIELDS, "2.33": FIELDS | FIELDS_0_29}
# Top-level additional_config keys of 2.32 besides neuron_config (reference:14-16, :154-176).
TOP_LEVEL = frozenset({"neuron_config", "vision_neuron_config", "mm_language_model_only"})
SAMPLING_KEYS = frozenset({"temperature", "top_k", "top_p", "all_greedy"})  # reference:79
SEGMENT_SIZES = frozenset({512, 1024, 2048, 4096, 8192})  # reference:50
DECODE_TILE = 128  # reference:51, additional:148 (P_MAX)

Convert = Callable[[Any, str, int], Any]  # (value, variable, max_model_len) -> the 2.32 value


def _same(value: Any, var: str, length: int) -> Any:
    return value


def _decode_buckets(value: Any, var: str, length: int) -> Any:
    """token_generation_buckets -> decode_context_length_buckets: max_model_len is the fallback the
    plugin always compiles (additional:146), so it is dropped; the rest must pass reference:51."""
    if not isinstance(value, list) or not all(json_int(v) for v in value):
        raise ConfigError(f"{var} must be a JSON list of whole numbers", (var,))
    kept = [v for v in value if v != length]
    return kept or None  # only the fallback: context-length bucketing stays off (reference:51, null)


@dataclass(frozen=True)
class Row:
    """One 2.27 override key in lane 2.32: `field` is where its value lands (None: refused), `lane_name`
    what this lane calls it instead (the refusal's fix), `cite` the doc line that decides it."""

    key: str
    field: str | None
    lane_name: str
    cite: str
    convert: Convert = _same


def _refused(key: str, lane_name: str, cite: str) -> Row:
    return Row(key, None, lane_name, cite)


_ASYNC = "--no-async-scheduling (async scheduling is on by default)"
ROWS: tuple[Row, ...] = (
    Row("context_encoding_buckets", "num_batched_tokens_buckets", "", f"{MIG}:99-106"),
    Row(
        "token_generation_buckets",
        "decode_context_length_buckets",
        "",
        f"{MIG}:54, {REF}:51",
        _decode_buckets,
    ),
    Row("on_device_sampling_config", "on_device_sampling_config", "", f"{REF}:79"),
    _refused("tp_degree", "SM_VLLM_TENSOR_PARALLEL_SIZE", f"{REF}:245-249"),
    _refused("batch_size", "SM_VLLM_MAX_NUM_SEQS", f"{REF}:49"),
    _refused("max_batch_size", "SM_VLLM_MAX_NUM_SEQS", f"{REF}:49"),
    _refused("ctx_batch_size", "SM_VLLM_MAX_NUM_SEQS", f"{REF}:49"),
    _refused("tkg_batch_size", "SM_VLLM_MAX_NUM_SEQS", f"{REF}:49"),
    _refused("seq_len", "SM_VLLM_MAX_MODEL_LEN", f"{REF}:245-249"),
    _refused("n_positions", "SM_VLLM_MAX_MODEL_LEN", f"{REF}:245-249"),
    _refused("torch_dtype", "SM_VLLM_DTYPE", f"{REF}:11-16"),
    _refused(
        "max_context_length", "SM_VLLM_MAX_NUM_BATCHED_TOKENS (the largest prefill bucket)", f"{REF}:48"
    ),
    _refused("is_continuous_batching", "always on (no setting)", f"{MIG}:45"),
    _refused("sequence_parallel_enabled", "always on (no setting)", f"{MIG}:51"),
    _refused(
        "enable_bucketing",
        "always on: SM_NEURON_NUM_BATCHED_TOKENS_BUCKETS / _NUM_SEQS_BUCKETS",
        f"{REF}:48-49",
    ),
    _refused("is_prefix_caching", "SM_VLLM_ENABLE_PREFIX_CACHING (on by default)", f"{REF}:57-63"),
    _refused("is_block_kv_layout", "SM_VLLM_BLOCK_SIZE (a vLLM flag)", f"{REF}:65"),
    _refused("pa_block_size", "SM_VLLM_BLOCK_SIZE (a vLLM flag)", f"{REF}:65"),
    _refused("pa_num_blocks", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE (a vLLM flag)", f"{REF}:64"),
    _refused("kv_cache_quant", "SM_VLLM_KV_CACHE_DTYPE=fp8 (a vLLM flag)", f"{REF}:66"),
    _refused(
        "quantized",
        "SM_NEURON_QUANTIZATION (mxfp4, mxfp8) or the checkpoint's quantization_config",
        f"{REF}:115",
    ),
    _refused("quantization_dtype", "SM_NEURON_QUANTIZATION (mxfp4, mxfp8)", f"{REF}:115"),
    _refused("quantization_type", "SM_NEURON_QUANTIZATION (mxfp4, mxfp8)", f"{REF}:115"),
    _refused(
        "chunked_prefill_config", "SM_VLLM_MAX_NUM_BATCHED_TOKENS (segmented prefill)", f"{FEAT}:128-151"
    ),
    _refused("enable_fused_speculation", "SM_VLLM_SPECULATIVE_CONFIG (EAGLE3)", f"{MIG}:47"),
    _refused("enable_eagle_speculation", "SM_VLLM_SPECULATIVE_CONFIG (EAGLE3)", f"{MIG}:47"),
    _refused("speculation_length", "SM_VLLM_SPECULATIVE_CONFIG num_speculative_tokens", f"{FEAT}:588-596"),
    _refused("async_mode", _ASYNC, f"{REF}:95"),
    _refused("text_neuron_config", "neuron_config (SM_NEURON_<FIELD> keys)", f"{REF}:14-16"),
    _refused("vision_neuron_config", "SM_VLLM_ADDITIONAL_CONFIG's vision_neuron_config", f"{REF}:14-16"),
    _refused("logical_nc_config", NOT_IN_LANE, f"{REF}:184-238 (no such field or variable)"),
    _refused(
        "save_sharded_checkpoint",
        NOT_IN_LANE + ": the compile cache holds NEFFs only",
        "compilation_cache.md:9-14",
    ),
    _refused("lora_ckpt_json", NOT_IN_LANE, "reference-feature-model-compatibility.md (no LoRA)"),
    _refused("target_modules", NOT_IN_LANE, "reference-feature-model-compatibility.md (no LoRA)"),
    _refused("lora_modules", NOT_IN_LANE, "reference-feature-model-compatibility.md (no LoRA)"),
)
BY_KEY = {row.key: row for row in ROWS}


def translate(
    res: Resolution,
    additional: dict[str, Any],
    length: int,
    lane: str = LANE,
    *,
    top_level: frozenset[str] = TOP_LEVEL,
) -> dict[str, Any]:
    """The native neuron_config of a launch: the user's native neuron_config (SM_VLLM_ADDITIONAL_CONFIG)
    plus every override key mapped through ROWS; a refused key, an unknown one (named with the closest
    documented field: FIELDS_BY_LANE[lane]), or two settings landing on one field are refused naming the
    variable that set it. `top_level`: the lane's additional_config keys (plan/lanes/native/rules.py; 2.33
    renamed vision_neuron_config to encoder_neuron_config)."""
    fields = FIELDS_BY_LANE.get(lane, FIELDS)
    _check_top_level(additional, top_level)
    native = additional.get("neuron_config") or {}
    if not isinstance(native, dict):
        raise ConfigError(
            "SM_VLLM_ADDITIONAL_CONFIG: neuron_config must be a JSON object", ("SM_VLLM_ADDITIONAL_CONFIG",)
        )
    out: dict[str, Any] = {}
    came: dict[str, str] = {}
    for key, value in native.items():
        if key not in fields:
            raise ConfigError(
                f"SM_VLLM_ADDITIONAL_CONFIG: neuron_config {key} is {NOT_IN_LANE}{_near(key, fields)}; "
                f"vllm-neuron 0.24 takes {', '.join(sorted(fields))} ({REF}:46-51, :79, :115)",
                ("SM_VLLM_ADDITIONAL_CONFIG",),
            )
        _land(out, came, key, value, "SM_VLLM_ADDITIONAL_CONFIG")
    for key, value in res.override.items():
        var = res.origin(key)
        field, new = map_key(key, value, var, length, fields)
        _land(out, came, field, new, var)
    for field, var in came.items():
        res.origins.setdefault(field, var)
    return out


def map_key(key: str, value: Any, var: str, length: int, fields: frozenset[str] = FIELDS) -> tuple[str, Any]:
    """(the 2.32 field, its value) for one 2.27 override key, or ConfigError with the lane's name for it
    (an unknown key: with the closest documented field or mapped key, `_near`)."""
    row = BY_KEY.get(key)
    if row is not None and row.field is not None:
        return row.field, row.convert(value, var, length)
    if row is not None:
        fix = (
            row.lane_name
            if row.lane_name.startswith(NOT_IN_LANE)
            else f"in lane {LANE} it is {row.lane_name}"
        )
        raise ConfigError(
            f"{var} sets {key}, an NxD Inference field that vllm-neuron 0.24 does not take: {fix} "
            f"({row.cite}); remove {var}",
            (var,),
        )
    if key in fields:
        return key, value
    raise ConfigError(
        f"{var} sets {key}: {NOT_IN_LANE}{_near(key, {*fields, *BY_KEY})}; vllm-neuron 0.24's "
        f"neuron_config takes {', '.join(sorted(fields))} ({REF}:46-51, :79, :115); remove {var}",
        (var,),
    )


def _near(key: str, names: Iterable[str]) -> str:
    """ ", did you mean X?" for the closest name (difflib), or nothing."""
    found = difflib.get_close_matches(key, sorted(names), n=1, cutoff=0.6)
    return f" (did you mean {found[0]}?)" if found else ""


def _land(out: dict[str, Any], came: dict[str, str], field: str, value: Any, var: str) -> None:
    if field in FIELDS - {"on_device_sampling_config", "quantization"} and value is not None:
        _check_list(field, value, var)
    if field in out:
        raise ConfigError(
            f"{came[field]} and {var} both set neuron_config {field} in lane {LANE}: keep one of them",
            (came[field], var),
        )
    out[field] = value
    came[field] = var


def _check_list(field: str, value: Any, var: str) -> None:
    if not isinstance(value, list) or not value or not all(json_int(v) and v > 0 for v in value):
        raise ConfigError(f"{var}: {field} must be a non-empty JSON list of positive integers", (var,))
    if value != sorted(set(value)):
        raise ConfigError(f"{var}: {field} must be strictly ascending ({REF}:48-51)", (var,))


def _check_top_level(additional: dict[str, Any], top_level: frozenset[str] = TOP_LEVEL) -> None:
    unknown = sorted(set(additional) - top_level)
    if unknown:
        lane, cite = (
            (NOT_IN_LANE, f"{REF}:14-16, :154-176") if top_level == TOP_LEVEL else ("not in this lane", REF)
        )
        raise ConfigError(
            f"SM_VLLM_ADDITIONAL_CONFIG sets {', '.join(unknown)}: {lane}; its "
            f"additional_config takes {', '.join(sorted(top_level))} ({cite})",
            ("SM_VLLM_ADDITIONAL_CONFIG",),
        )


def check_buckets(
    cfg: dict[str, Any], origins: dict[str, str], *, length: int, seqs: int, batched: int, block: int
) -> None:
    """The bucket rules of reference:48-51 against the resolved launch: the largest prefill bucket is
    max_num_batched_tokens, the largest decode bucket max_num_seqs, segment sizes from a fixed set and
    divisible by block_size, context-length buckets below max_model_len and multiples of 128."""
    checks: list[tuple[str, bool, str]] = []
    tokens = cfg.get("num_batched_tokens_buckets")
    if tokens:
        checks.append(
            (
                "num_batched_tokens_buckets",
                tokens[-1] == batched,
                f"its largest must equal max_num_batched_tokens {batched} ({REF}:48)",
            )
        )
    nseqs = cfg.get("num_seqs_buckets")
    if nseqs:
        checks.append(
            ("num_seqs_buckets", nseqs[-1] == seqs, f"its largest must equal max_num_seqs {seqs} ({REF}:49)")
        )
    segments = cfg.get("kv_segment_size_buckets")
    if segments:
        ok = set(segments) <= SEGMENT_SIZES and all(s % block == 0 for s in segments)
        checks.append(
            (
                "kv_segment_size_buckets",
                ok,
                f"values must be in {sorted(SEGMENT_SIZES)} and divisible by block_size {block} ({REF}:50)",
            )
        )
    decode = cfg.get("decode_context_length_buckets")
    if decode is not None:
        ok = all(v < length and v % DECODE_TILE == 0 for v in decode)
        checks.append(
            (
                "decode_context_length_buckets",
                ok,
                f"values must be below max_model_len {length} and multiples of {DECODE_TILE} ({REF}:51)",
            )
        )
    for field, ok, why in checks:
        if not ok:
            var = origins.get(field, "SM_NEURON_" + field.upper())
            raise ConfigError(f"{var}: {field}={cfg[field]}: {why}", (var,))
