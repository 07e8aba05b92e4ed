"""The Neuron half of the plan: resolve every compiled-graph setting explicitly, then check the rules.

The plugin compiles one graph for (tp, max_model_len, max_num_seqs, dtype, KV layout, override); any
of them left implicit becomes a plugin default nobody chose. So every one is decided here, said in a
warning when derived, and rendered either for vllm-neuron 0.2.x (`--additional-config`) or for the
older in-tree integration (`--device neuron --override-neuron-config`, VLLM_NEURON_FRAMEWORK).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from neuronserve.config.settings import Settings, env_name
from neuronserve.errors import ConfigError
from neuronserve.plan import rules
from neuronserve.plan.hostfacts import HostFacts, ModelFacts
from neuronserve.plan.intree import choose_integration, tnx_env, tnx_kv

DEFAULT_MAX_NUM_SEQS = 8
DEFAULT_BLOCK_SIZE = 32
DEFAULT_DTYPE = "bfloat16"
# Engine settings this module renders itself (not passed through generically).
CONSUMED = frozenset(
    {
        "tensor-parallel-size",
        "max-model-len",
        "max-num-seqs",
        "dtype",
        "enable-prefix-caching",
        "block-size",
        "num-gpu-blocks-override",
        "enable-chunked-prefill",
        "additional-config",
        "device",
        "override-neuron-config",
    }
)


@dataclass(frozen=True)
class NeuronEngine:
    flags: list[str]  # engine flags after --model/--host/--port
    override: dict[str, Any]
    env: dict[str, str]
    integration: str  # "plugin" | "in-tree"
    graph: dict[str, Any]  # everything that changes the compiled graph (for the cache key)


def _int(settings: Settings, key: str) -> int | None:
    value = settings.get(key)
    if value is None or value is False:
        return None
    text = str(value).strip()
    if not text.isdigit():
        var = settings.origin(key, env_name(key))
        raise ConfigError(f"{var}={value!r} must be a positive integer", (var,))
    return int(text)


def _model_len(settings: Settings, model: ModelFacts | None, model_uri: str, warnings: list[str]) -> int:
    given = _int(settings, "max-model-len")
    if given:
        return given
    config = (model.config if model else None) or {}
    derived = config.get("max_position_embeddings") or (config.get("text_config") or {}).get(
        "max_position_embeddings"
    )
    if isinstance(derived, int) and derived > 0:
        warnings.append(
            f"max_model_len derived from {model_uri}/config.json max_position_embeddings = {derived}; "
            f"set SM_VLLM_MAX_MODEL_LEN to compile for a shorter length (faster, less memory)"
        )
        return derived
    raise ConfigError(
        "max_model_len is required on Neuron (the plugin compiles one fixed length and does "
        "not derive it) and "
        f"{model_uri} has no local config.json to derive it from: set SM_VLLM_MAX_MODEL_LEN (e.g. 4096)",
        ("SM_VLLM_MAX_MODEL_LEN",),
    )


def _tp(settings: Settings, facts: HostFacts, warnings: list[str]) -> int:
    value = settings.get("tensor-parallel-size")
    origin = settings.origin("tensor-parallel-size", "SM_VLLM_TENSOR_PARALLEL_SIZE")
    if value is None or str(value).lower() == "max":
        if facts.visible_cores is None:
            raise ConfigError(
                "cannot tell how many NeuronCores are visible (no /dev/neuron*, no "
                "NEURON_RT_VISIBLE_CORES): set "
                "SM_VLLM_TENSOR_PARALLEL_SIZE (e.g. 2) or NEURON_RT_VISIBLE_CORES (e.g. 0-1)",
                ("SM_VLLM_TENSOR_PARALLEL_SIZE", "NEURON_RT_VISIBLE_CORES"),
            )
        warnings.append(
            f"tensor_parallel_size set to all {facts.visible_cores} visible NeuronCores "
            f"({facts.cores_source})"
        )
        return facts.visible_cores
    tp = _int(settings, "tensor-parallel-size") or 0
    rules.check_tp(tp, origin, facts.visible_cores, facts.cores_source)
    if facts.visible_cores is None:
        warnings.append(
            f"{origin}={tp} not checked against the visible NeuronCores (none found on this host)"
        )
    return tp


def _origins(settings: Settings) -> dict[str, str]:
    keys = (
        "block-size",
        "num-gpu-blocks-override",
        "max-model-len",
        "enable-chunked-prefill",
        "enable-lora",
        "task",
        "runner",
        "enable-prefix-caching",
    )
    out = {k: settings.origin(k, env_name(k)) for k in keys}
    out.update({k: s.origin for k, s in settings.override.items()})
    if settings.get("num-gpu-blocks-override") is not None:
        out["num-gpu-blocks-given"] = "yes"
    return out


def _kv(
    settings: Settings, override: dict[str, Any], length: int, seqs: int, warnings: list[str]
) -> tuple[list[str], dict[str, Any]]:
    """Rule 4/5: contiguous cache, or a block layout with every number explicit."""
    origins = _origins(settings)
    prefix = settings.get("enable-prefix-caching") is True
    chunked = settings.get("enable-chunked-prefill") is True
    if override.get("is_prefix_caching") is True and not prefix:
        var = origins.get("is_prefix_caching", "SM_NEURON_IS_PREFIX_CACHING")
        raise ConfigError(
            f"{var} sets is_prefix_caching but prefix caching is off: set "
            f"SM_VLLM_ENABLE_PREFIX_CACHING=true, or remove is_prefix_caching",
            (var,),
        )
    for key in ("is_prefix_caching", "is_block_kv_layout"):
        if prefix and override.get(key) is False:
            var = origins.get(key, "SM_NEURON_" + key.upper())
            raise ConfigError(f"{var} sets {key}=false but prefix caching needs it true: remove it", (var,))
    block_layout = prefix or chunked or override.get("is_block_kv_layout") is True
    block, blocks = _int(settings, "block-size"), _int(settings, "num-gpu-blocks-override")
    if not block_layout:
        for key, value in (("block-size", block), ("num-gpu-blocks-override", blocks)):
            if value is not None:
                warnings.append(
                    f"{origins[key]} ignored: the contiguous KV cache (no prefix caching) uses one "
                    f"block of max_model_len per sequence"
                )
        rules.check_pa_keys(override, None, None, origins)
        return ["--no-enable-prefix-caching"], {"mode": "contiguous"}
    if block is None:
        block = DEFAULT_BLOCK_SIZE
        warnings.append(f"block_size defaulted to {block} for the block KV layout")
    if blocks is None:
        blocks = math.ceil(length / block) * seqs
        if "pa_num_blocks" not in override:
            warnings.append(f"num_gpu_blocks_override computed as ceil({length}/{block})*{seqs} = {blocks}")
    rules.check_block_layout(length, seqs, block, blocks, origins)
    rules.check_pa_keys(override, block, blocks, origins)
    override["is_block_kv_layout"] = True
    if prefix:
        override["is_prefix_caching"] = True
    flags = ["--enable-prefix-caching" if prefix else "--no-enable-prefix-caching"]
    flags += ["--block-size", str(block), "--num-gpu-blocks-override", str(blocks)]
    return flags, {"mode": "prefix" if prefix else "block", "block_size": block, "num_blocks": blocks}


def neuron_engine(
    settings: Settings, facts: HostFacts, model_uri: str, model: ModelFacts | None, warnings: list[str]
) -> NeuronEngine:
    """Resolve and check the Neuron engine settings (pure)."""
    integration, framework = choose_integration(settings, facts, warnings)
    origins = _origins(settings)
    rules.check_task(settings.get("enable-lora"), settings.get("task"), settings.get("runner"), origins)
    rules.check_architecture(model, model_uri, warnings)
    tp = _tp(settings, facts, warnings)
    length = _model_len(settings, model, model_uri, warnings)
    seqs = _int(settings, "max-num-seqs")
    if seqs is None:
        seqs = DEFAULT_MAX_NUM_SEQS
        warnings.append(
            f"max_num_seqs defaulted to {seqs} (the compiled batch size): set SM_VLLM_MAX_NUM_SEQS"
        )
    dtype = str(settings.get("dtype") or DEFAULT_DTYPE)
    rules.check_dtype(dtype, settings.origin("dtype", "SM_VLLM_DTYPE"))
    override = {k: s.value for k, s in settings.override.items()}
    if settings.logical_nc_config:
        lnc = int(settings.logical_nc_config) if settings.logical_nc_config.isdigit() else 0
        if override.setdefault("logical_nc_config", lnc) != lnc:
            raise ConfigError(
                f"NEURON_LOGICAL_NC_CONFIG={lnc} and override logical_nc_config="
                f"{override['logical_nc_config']} disagree: set one of them",
                ("NEURON_LOGICAL_NC_CONFIG", origins.get("logical_nc_config", "")),
            )
    chunked = settings.get("enable-chunked-prefill") is True
    warnings.extend(rules.check_chunked(chunked, override, settings.passthrough_env, origins, seqs))
    tnx = framework == "transformers-neuronx"
    if tnx:
        kv_flags, kv = tnx_kv(settings, _int(settings, "block-size"), length, origins)
    else:
        kv_flags, kv = _kv(settings, override, length, seqs, warnings)
    prefix = kv["mode"] == "prefix"
    floor = rules.PREFIX_MIN_CONTEXT_BUCKET
    if prefix and length < floor and "context_encoding_buckets" not in override:
        warnings.append(
            f"prefix caching with max_model_len {length} < {floor}: NxD Inference's smallest "
            f"prefix-caching prefill bucket is {floor}; if the compile fails, set "
            f"SM_VLLM_MAX_MODEL_LEN={floor} or more"
        )
    rules.check_buckets(override, length, prefix, origins)
    rules.check_sequence_parallel(override, length, tp, origins)
    rules.check_sampling(override, settings.passthrough_env, origins)
    spec = settings.get("speculative-config")
    draft = _draft_facts(spec, facts)
    rules.check_eagle(
        spec, settings.origin("speculative-config", "SM_VLLM_SPECULATIVE_CONFIG"), draft, warnings
    )

    flags = [
        "--tensor-parallel-size",
        str(tp),
        "--max-model-len",
        str(length),
        "--max-num-seqs",
        str(seqs),
        "--dtype",
        dtype,
        *kv_flags,
    ]
    if chunked:
        flags.append("--enable-chunked-prefill")
    env: dict[str, str] = {}
    env["NEURON_RT_VISIBLE_CORES"] = settings.visible_cores or (f"0-{tp - 1}" if tp > 1 else "0")
    if chunked:
        env["DISABLE_NEURON_CUSTOM_SCHEDULER"] = "1"
    if integration == "plugin":
        extra = dict(settings.additional_config)
        extra["override_neuron_config"] = override
        flags += ["--additional-config", json.dumps(extra, sort_keys=True, separators=(",", ":"))]
    else:
        flags = ["--device", "neuron", *flags]
        if override:
            flags += ["--override-neuron-config", json.dumps(override, sort_keys=True, separators=(",", ":"))]
        env["VLLM_NEURON_FRAMEWORK"] = framework or "neuronx-distributed-inference"
        if tnx:
            env.update(tnx_env(settings, override))
    graph = {
        "integration": integration,
        "framework": framework,
        "tp": tp,
        "max_model_len": length,
        "max_num_seqs": seqs,
        "dtype": dtype,
        "kv": kv,
        "chunked_prefill": chunked,
        "override": override,
        "speculative_config": spec,
        "quantization": settings.get("quantization"),
        "logical_nc_config": settings.logical_nc_config,
    }
    return NeuronEngine(flags, override, env, integration, graph)


def _draft_facts(spec: Any, facts: HostFacts) -> ModelFacts | None:
    try:
        cfg = json.loads(spec) if isinstance(spec, str) else None
    except ValueError:
        return None
    return facts.paths.get(str(cfg.get("model"))) if isinstance(cfg, dict) else None
