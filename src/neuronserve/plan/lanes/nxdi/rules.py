"""The rules that fail late on Neuron (after the download and the compile) unless checked up front, each
refusing with the variable and a value that works; each cites the plugin or NxD Inference source line
it mirrors.

These rules are what a Neuron start gets wrong after a 10 GB download and a 15-minute compile. They are
pure functions of the resolved numbers, the override and the model's config.json, so each one is tested
both ways (passes and refuses) without a device.
"""

from __future__ import annotations

import math
from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.facts import ModelFacts, json_int
from neuronserve.plan.resolution import Resolution

BLOCK_SIZES = (1, 8, 16, 32, 64, 128)  # vLLM 0.11.0 --block-size choices
PREFIX_MIN_CONTEXT_BUCKET = 512
PREFIX_MIN_TOKEN_BUCKET = 256


def check_tp(tp: int, origin: str, visible: int | None, source: str) -> None:
    """Rule 3: TP must fit the visible NeuronCores (TP 32 on a 24-core inf2.48xlarge is the classic)."""
    if tp < 1:
        raise ConfigError(f"{origin}={tp}: tensor parallel size must be at least 1", (origin,))
    if visible is not None and tp > visible:
        raise ConfigError(
            f"{origin}={tp} exceeds the {visible} visible NeuronCores ({source}): set {origin}={visible} "
            f"or fewer, or run on an instance with more cores",
            (origin,),
        )


DTYPES = ("auto", "bfloat16", "float", "float16", "float32", "half")  # vLLM 0.11.0 --dtype choices


def check_dtype(dtype: str, origin: str) -> None:
    """`auto` becomes float32 under NxD Inference: refuse it rather than compile the wrong graph. A value
    outside vLLM's --dtype choices (src/neuronserve/data/vllm-0.11.0-cli.json; argparse compares them
    as written, so `AUTO` or `int8` too) is refused here, before any download, rather than by the engine."""
    if dtype not in DTYPES:
        raise ConfigError(
            f"{origin}={dtype} is not a vLLM dtype: use one of {', '.join(DTYPES[1:])} (bfloat16 on Neuron)",
            (origin,),
        )
    if dtype == "auto":
        raise ConfigError(
            f"{origin}=auto compiles float32 on Neuron: set {origin}=bfloat16 (or "
            "float16/float32 explicitly)",
            (origin,),
        )


def check_block_layout(
    length: int,
    seqs: int,
    block: int,
    blocks: int,
    res: Resolution,
    *,
    sizes: tuple[tuple[int, ...], str] = (BLOCK_SIZES, "vLLM 0.11.0"),
) -> None:
    """Rule 4: a block KV layout needs a legal block size dividing max_model_len and enough blocks.

    `sizes`: the lane's vLLM --block-size values and its name (vLLM 0.11.0 config/cache.py:24; 0.13.0
    adds 256, config/cache.py:22: profiles.py).

    vllm-neuron 0.2.2+lts pads each block table to max_model_len // block_size entries
    (worker/neuronx_distributed_model_runner.py:886, 951), so a block size that does not divide it
    leaves the last partial block out; the loader asserts the user's --num-gpu-blocks-override (the flag
    less the null block platform.py:220-230 adds) is at least ceil(max_model_len / block_size) *
    max_num_seqs (worker/neuronx_distributed_model_loader.py:848-862).
    """
    origins = res.origins
    b_var, n_var, l_var = origins["block-size"], origins["num-gpu-blocks-override"], origins["max-model-len"]
    allowed, vllm = sizes
    if block not in allowed:
        raise ConfigError(
            f"{b_var}={block} is not a block size of {vllm}: use one of "
            f"{', '.join(map(str, allowed))} (e.g. 32)",
            (b_var,),
        )
    if length % block:
        up = math.ceil(length / block) * block
        raise ConfigError(
            f"{l_var}={length} is not a multiple of the block size {block} ({b_var}): set {l_var}={up} "
            f"(the plugin's floor division fails its own check otherwise)",
            (l_var, b_var),
        )
    need = math.ceil(length / block) * seqs
    if blocks < need:
        raise ConfigError(
            f"{n_var}={blocks} KV blocks cannot hold {seqs} sequences of {length} tokens in "
            f"blocks of {block}: "
            f"set {n_var}={need} or more (ceil(max_model_len / block_size) * max_num_seqs)",
            (n_var,),
        )


def check_pa_keys(block: int | None, blocks: int | None, res: Resolution) -> None:
    """Paged-attention keys: pa_num_blocks / pa_block_size in the override must match their flags.

    vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:799-834 (_handle_pa_num_blocks,
    block layout only): pa_num_blocks must equal the --num-gpu-blocks-override the user gave, exactly
    (the plugin compares it with the flag's value before its own +1 for the null block,
    platform.py:220-230, and raises otherwise), and without that flag the key raises. pa_block_size
    replaces the block size the plugin passes (worker/neuronx_distributed_model_loader.py:780-781).
    """
    override = res.override
    origins = res.origins
    n_var = origins["num-gpu-blocks-override"]
    if "pa_num_blocks" in override:
        origin = origins.get("pa_num_blocks", "SM_NEURON_PA_NUM_BLOCKS")
        value = override["pa_num_blocks"]
        if blocks is None or not origins.get("num-gpu-blocks-given"):
            raise ConfigError(
                f"{origin} sets pa_num_blocks={value} without a matching "
                "--num-gpu-blocks-override (the plugin "
                f"raises): set {n_var}={value} and SM_VLLM_ENABLE_PREFIX_CACHING=true, or "
                "remove pa_num_blocks",
                (origin, n_var),
            )
        if value != blocks:
            raise ConfigError(
                f"{origin} sets pa_num_blocks={value} but {n_var}={blocks}: the plugin requires them equal "
                f"(it adds the null block itself): set {n_var}={value} or remove pa_num_blocks "
                f"(the plugin derives it)",
                (origin, n_var),
            )
    if "pa_block_size" in override and block is not None and override["pa_block_size"] != block:
        origin = origins.get("pa_block_size", "SM_NEURON_PA_BLOCK_SIZE")
        raise ConfigError(
            f"{origin} sets pa_block_size={override['pa_block_size']} but the block size is {block}: set "
            f"{origins['block-size']}={override['pa_block_size']} or remove pa_block_size",
            (origin, origins["block-size"]),
        )


def _bucket_list(value: Any, origin: str, key: str) -> list[int]:
    """A bucket list as NxD Inference uses it: non-empty (it takes the largest entry) and of positive
    integers. JSON `true` is refused although Python counts it as the int 1."""
    if not isinstance(value, list) or not value or not all(json_int(v) and v > 0 for v in value):
        raise ConfigError(
            f"{origin}: {key} must be a JSON list of positive integers, e.g. [128, 512]", (origin,)
        )
    return value


def check_buckets(
    *,
    length: int,
    max_context: int,
    prefix: bool,
    res: Resolution,
) -> None:
    """Buckets as NxD Inference 0.7 checks them.

    nxdi config.py:183-195: the largest context-encoding bucket must be <= max_context_length (which is
    max_model_len, or max_num_batched_tokens under chunked prefill, or the override's
    max_context_length: derive.max_context_length), the largest token-generation bucket <= seq_len.
    With prefix caching and bucketing on (the plugin's default), context_encoding_buckets without
    prefix_buckets reach `[0] + None` in autobucketing.py:45-57 (TypeError): refused.
    The 512 (prefill) / 256 (decode) minimums with prefix caching are comments next to the automatic
    buckets (autobucketing.py:188, 238), not checks: a smaller bucket is warned about, not refused.
    """
    override = res.override
    for key, limit, floor in (
        ("context_encoding_buckets", max_context, PREFIX_MIN_CONTEXT_BUCKET),
        ("token_generation_buckets", length, PREFIX_MIN_TOKEN_BUCKET),
    ):
        if override.get(key) is None:
            continue
        origin = res.origin(key)
        buckets = _bucket_list(override[key], origin, key)
        too_big = [b for b in buckets if b > limit]
        if too_big:
            what = "max_model_len" if limit == length else "max_context_length (the longest prefill)"
            raise ConfigError(
                f"{origin}: {key} {too_big} exceed {what} {limit}: use buckets <= {limit} "
                f"(e.g. {[b for b in buckets if b <= limit] or [limit]}) or raise "
                f"{res.origins['max-model-len'] if limit == length else _context_var(res.origins)}",
                (origin, res.origins["max-model-len"]),
            )
        if prefix and min(buckets) < floor:
            res.warn(
                f"{origin}: {min(buckets)} is below {floor}, the smallest {key} entry NxD Inference "
                "generates itself with prefix caching (its kernel's stated minimum, not a check)"
            )
    bucketing = override.get("enable_bucketing", True) is not False
    given = override.get("context_encoding_buckets")
    if prefix and bucketing and given and not override.get("prefix_buckets"):
        origin = res.origin("context_encoding_buckets")
        raise ConfigError(
            f"{origin}: with prefix caching, context_encoding_buckets need prefix_buckets too (NxD Inference "
            "builds a 2-D grid from both and fails with a TypeError without them): set "
            f"SM_NEURON_PREFIX_BUCKETS (e.g. {override['context_encoding_buckets']}), or remove {origin}",
            (origin, "SM_NEURON_PREFIX_BUCKETS"),
        )


def _context_var(origins: dict[str, str]) -> str:
    if "max_context_length" in origins:
        return origins["max_context_length"]
    return origins.get("max-num-batched-tokens", "SM_VLLM_MAX_NUM_BATCHED_TOKENS")


def check_chunked(chunked: bool, seqs: int, res: Resolution) -> None:
    """Rule 7: chunked prefill needs its config, block layout and the custom scheduler off.

    vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:844-846 asserts
    chunked_prefill_config and is_block_kv_layout; platform.py:248-255 turns chunked prefill off unless
    DISABLE_NEURON_CUSTOM_SCHEDULER=1 (read at platform.py:214-215).
    The native scheduler without chunked prefill is decided in kv.py (it needs a block size).
    """
    override = res.override
    c_var = res.origins["enable-chunked-prefill"]
    if chunked:
        if not isinstance(override.get("chunked_prefill_config"), dict):
            raise ConfigError(
                f"{c_var}=true needs a chunked_prefill_config in override_neuron_config: set "
                f"SM_NEURON_CHUNKED_PREFILL_CONFIG='{{\"max_num_seqs\": {seqs}}}'",
                (c_var, "SM_NEURON_CHUNKED_PREFILL_CONFIG"),
            )
        if res.user_env.get("DISABLE_NEURON_CUSTOM_SCHEDULER", "1").strip() != "1":
            raise ConfigError(
                "chunked prefill needs DISABLE_NEURON_CUSTOM_SCHEDULER=1 (the custom scheduler disables it): "
                "unset DISABLE_NEURON_CUSTOM_SCHEDULER or set it to 1",
                ("DISABLE_NEURON_CUSTOM_SCHEDULER", c_var),
            )
    elif "chunked_prefill_config" in override:
        origin = res.origin("chunked_prefill_config")
        raise ConfigError(
            f"{origin} sets chunked_prefill_config but chunked prefill is off: set "
            f"SM_VLLM_ENABLE_CHUNKED_PREFILL=true, or remove chunked_prefill_config",
            (origin, "SM_VLLM_ENABLE_CHUNKED_PREFILL"),
        )


def check_sequence_parallel(buckets: list[int], tp: int, res: Resolution) -> None:
    """Sequence parallelism splits every traced prefill length over the TP ranks.

    NxD Inference model_base.py:1341-1342 calls validate_sequence_parallel (:1513-1521) for each
    context-encoding trace, asserting seq_length % tp == 0. The traced lengths are the context buckets
    (derive.context_buckets: the user's, or the automatic 128, 256, ..., max_context_length).
    """
    override = res.override
    if override.get("sequence_parallel_enabled") is not True:
        return
    bad = [b for b in buckets if b % tp]
    if bad:
        var, l_var = res.origin("sequence_parallel_enabled"), res.origins["max-model-len"]
        fixed = sorted({max(tp, b // tp * tp) for b in buckets})
        raise ConfigError(
            f"{var}: sequence parallelism needs every prefill bucket divisible by tensor_parallel_size {tp}, "
            f"but {bad} are not (buckets {buckets}): set SM_NEURON_CONTEXT_ENCODING_BUCKETS={fixed} "
            f"(and {l_var} a multiple of {tp}), or a TP that divides them, "
            f"or remove {var}",
            (var, l_var),
        )


def check_task(task: Any, runner: Any, res: Resolution) -> None:
    """Rule 8: only text generation (the plugin's runner has no pooling path: it answers every step
    with `pooler_output=[]`, vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_runner.py:485)."""
    for key, value in (("task", task), ("runner", runner)):
        if value not in (None, "generate", "auto"):
            var = res.origins[key]
            raise ConfigError(
                f"{var}={value}: vllm-neuron 0.2.x serves text generation only: set "
                f"{var}=generate or unset it",
                (var,),
            )


def check_eagle(draft: ModelFacts | None, res: Resolution) -> None:
    """Rule 12: an EAGLE draft without the target's lm_head.weight fails at load (`draft`: the local
    facts of the draft res.speculation names). A speculative config that is no JSON is refused here."""
    spec, origin = res.speculation, res.origins["speculative-config"]
    if spec.invalid:
        raise ConfigError(f"{origin} must be a JSON object", (origin,))
    if spec.config is None or "eagle" not in spec.method.lower():
        return
    name = spec.config.get("model")
    if draft is None or draft.has_lm_head is None:
        res.warn(f"{origin}: could not check that the EAGLE draft {name} carries lm_head.weight")
    elif not draft.has_lm_head:
        raise ConfigError(
            f"{origin}: EAGLE draft {name} has no lm_head.weight: copy the target model's "
            f"lm_head.weight into the draft checkpoint",
            (origin,),
        )


# RoPE types whose max_position_embeddings already is the scaled length, so vLLM applies no factor
# (vLLM 0.11.0 config/model.py:1839-1862, _get_and_verify_max_len).
ROPE_ALREADY_SCALED = ("su", "longrope", "llama3")


def trained_context(config: dict[str, Any]) -> tuple[int, str] | None:
    """The longest position a config.json covers, as vLLM 0.11.0 derives it (config/model.py:1839-1862):
    max_position_embeddings (text_config's for a multimodal model), times a rope_scaling factor unless the
    RoPE type is already scaled; yarn scales its original_max_position_embeddings. With what covers it, in
    words. None when the config names no length."""
    nested = config.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else {}
    mpe = config.get("max_position_embeddings") or text.get("max_position_embeddings")
    if not json_int(mpe) or mpe <= 0:
        return None
    said = f"max_position_embeddings {mpe}"
    scaling = config.get("rope_scaling") or text.get("rope_scaling")
    if not isinstance(scaling, dict):
        return mpe, said
    kind = str(scaling.get("rope_type") or scaling.get("type") or "default")
    factor = scaling.get("factor", 1.0)
    if kind in ROPE_ALREADY_SCALED or not isinstance(factor, int | float) or isinstance(factor, bool):
        return mpe, said
    base = scaling.get("original_max_position_embeddings", mpe) if kind == "yarn" else mpe
    if not json_int(base):
        return mpe, said
    covered = int(base * factor)
    return covered, f"{said} with rope_scaling {kind} x {factor:g} = {covered}"


def warn_beyond_trained(length: int, config: dict[str, Any] | None, model_uri: str, res: Resolution) -> None:
    """max_model_len above the positions the model was trained for, and no rope scaling that covers it:
    planned, as the stack does, and said with both numbers and the setting the length came from.

    vLLM refuses such a length itself (config/model.py:1869-1890, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN),
    but vllm-neuron replaces that check with one that returns the length as given (0.2.2+lts
    platform_overrides.py:49-54, 0.4.1 :52-57, installed by platform.py), so it compiles and serves
    (tests/contract cases issue-42-beyond-trained-positions build on both lanes); positions beyond the
    trained ones were never seen in training, and output there may degrade."""
    covered = trained_context(config or {})
    if covered is None or length <= covered[0]:
        return
    limit, what = covered
    var = res.origins["max-model-len"]
    res.warn(
        f"{var}={length} is above {model_uri}/config.json {what}: vllm-neuron skips vLLM's own length check "
        "(0.2.2+lts platform_overrides.py:49-54), so it compiles and serves, but positions past "
        f"{limit} were never trained and output there may degrade: set {var}={limit} or less, or a "
        "rope_scaling in config.json that covers it"
    )
