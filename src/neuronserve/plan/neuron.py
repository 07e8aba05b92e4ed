"""The Neuron half of the plan: resolve every compiled-graph setting explicitly, then check the rules.

The plugin compiles one graph for (tp, max_model_len, max_num_seqs, dtype, KV layout, override); any
of them left implicit becomes a plugin default nobody chose. So every one is decided here, said in a
warning when derived, and rendered either for vllm-neuron 0.2.x (`--additional-config`) or for the
older in-tree integration (`--device neuron --override-neuron-config`, VLLM_NEURON_FRAMEWORK).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from neuronserve.config.settings import Settings, env_name
from neuronserve.counts import positive, whole
from neuronserve.errors import ConfigError
from neuronserve.plan import nxdi, overrides, rules
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.intree import choose_integration, tnx_env, tnx_kv
from neuronserve.plan.jsonint import json_int
from neuronserve.plan.kv import kv_layout

DEFAULT_MAX_NUM_SEQS = 8
DEFAULT_DTYPE = "bfloat16"
DEFAULT_CHUNK_TOKENS = 2048  # chunked prefill's compiled chunk (max_context_length) unless set
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
        "max-num-batched-tokens",
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
    """A whole number from its setting (None when unset or false), read by counts.whole."""
    value = settings.get(key)
    if value is None or value is False:
        return None
    number = whole(str(value))
    if number is None:
        var = settings.origin(key, env_name(key))
        raise ConfigError(f"{var}={value!r} must be a positive integer", (var,))
    return number


def _model_len(settings: Settings, model: ModelFacts | None, model_uri: str, warnings: list[str]) -> int:
    given = _int(settings, "max-model-len")
    if given:
        return given
    config = (model.config if model else None) or {}
    derived = config.get("max_position_embeddings") or (config.get("text_config") or {}).get(
        "max_position_embeddings"
    )
    if json_int(derived) and derived > 0:  # JSON true is no length
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
        "max-num-batched-tokens",
        "tensor-parallel-size",
        "max-num-seqs",
        "dtype",
        "speculative-config",
    )
    out = {k: settings.origin(k, env_name(k)) for k in keys}
    out.update({k: s.origin for k, s in settings.override.items()})
    if settings.get("num-gpu-blocks-override") not in (None, False):  # false is unset, as in plan/kv.py
        out["num-gpu-blocks-given"] = "yes"
    return out


def neuron_engine(
    settings: Settings, facts: HostFacts, model_uri: str, model: ModelFacts | None, warnings: list[str]
) -> NeuronEngine:
    """Resolve and check the Neuron engine settings (pure)."""
    integration, framework = choose_integration(settings, facts, warnings)
    origins = _origins(settings)
    rules.check_task(settings.get("task"), settings.get("runner"), origins)
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
        text = settings.logical_nc_config
        lnc = positive(text)  # 0 was compiled into the override
        if lnc is None:
            raise ConfigError(
                f"NEURON_LOGICAL_NC_CONFIG={text!r} must be a positive integer (physical NeuronCores per "
                "logical core: 1, or 2 on Trn2)",
                ("NEURON_LOGICAL_NC_CONFIG",),
            )
        if override.setdefault("logical_nc_config", lnc) != lnc:
            raise ConfigError(
                f"NEURON_LOGICAL_NC_CONFIG={lnc} and override logical_nc_config="
                f"{override['logical_nc_config']} disagree: set one of them",
                ("NEURON_LOGICAL_NC_CONFIG", origins.get("logical_nc_config", "")),
            )
    chunked = settings.get("enable-chunked-prefill") is True
    lora = settings.get("enable-lora") is True
    overrides.check_lora(lora, override, facts.versions.get("vllm-neuron"), origins)
    rules.check_chunked(chunked, override, settings.passthrough_env, origins, seqs)
    overrides.check_chunked_config(override, seqs, origins, warnings)
    batched = _batched_tokens(settings, chunked, length, seqs, origins=origins, warnings=warnings)
    spec = settings.get("speculative-config")
    overrides.check_launch_duplicates(
        override,
        _launch(
            origins, tp=tp, seqs=seqs, length=length, dtype=dtype, chunked=chunked, batched=batched, spec=spec
        ),
        origins,
    )
    tnx = framework == "transformers-neuronx"
    if tnx:
        kv_flags, kv = tnx_kv(settings, _int(settings, "block-size"), length, origins)
    else:
        kv_flags, kv = kv_layout(
            settings,
            override,
            length=length,
            seqs=seqs,
            origins=origins,
            warnings=warnings,
            plugin=integration == "plugin",
        )
    prefix = kv["mode"] == "prefix"
    floor = rules.PREFIX_MIN_CONTEXT_BUCKET
    if prefix and length < floor and "context_encoding_buckets" not in override:
        warnings.append(
            f"prefix caching with max_model_len {length} < {floor}: NxD Inference's smallest "
            f"prefix-caching prefill bucket is {floor}; if the compile fails, set "
            f"SM_VLLM_MAX_MODEL_LEN={floor} or more"
        )
    max_context = _max_context(override, length, chunked, batched, origins=origins, warnings=warnings)
    rules.check_buckets(
        override, length=length, max_context=max_context, prefix=prefix, origins=origins, warnings=warnings
    )
    buckets = nxdi.context_buckets(override, max_context, prefix, chunked)
    rules.check_sequence_parallel(override, buckets, tp, origins)
    overrides.check_sampling(override, settings.passthrough_env, origins, warnings)
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
        flags += ["--enable-chunked-prefill", "--max-num-batched-tokens", str(batched)]
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
        "max_num_batched_tokens": batched,
        "override": override,
        # Item 10: every --additional-config key reaches the plugin (0.2.2's max_prompt_length changes the
        # graph), NEURON_CC_FLAGS reaches the compiler, and the draft is identified by its content.
        "additional_config": dict(settings.additional_config),
        "neuron_cc_flags": settings.passthrough_env.get("NEURON_CC_FLAGS"),
        "speculative_config": spec,
        "draft": {"config_sha256": draft.config_sha256, "weights": draft.weights_digest} if draft else None,
        "lora": lora,
        "quantization": settings.get("quantization"),
        "logical_nc_config": settings.logical_nc_config,
    }
    return NeuronEngine(flags, override, env, integration, graph)


def _batched_tokens(
    settings: Settings, chunked: bool, length: int, seqs: int, *, origins: dict[str, str], warnings: list[str]
) -> int | None:
    """Item 5: max_num_batched_tokens is compiled only under chunked prefill, so it is chosen here then.

    vllm-neuron 0.2.0 loader.py:734-736: with chunked prefill it becomes max_context_length (the chunk
    the graph is traced for), so leaving it to vLLM's default would compile a number nobody chose.
    Without chunked prefill the custom scheduler overwrites it with 131072 (platform.py:187-188): a
    configured value is dropped with a warning. NxD Inference asserts max_context_length <= seq_len
    (nxdi config.py:136), and vLLM needs it >= max_num_seqs.
    """
    var = origins["max-num-batched-tokens"]
    given = _int(settings, "max-num-batched-tokens")
    if not chunked:
        if given is not None:
            warnings.append(
                f"{var} ignored: without chunked prefill the plugin's scheduler sets "
                f"max_num_batched_tokens to {nxdi.CUSTOM_SCHEDULER_TOKENS}"
            )
        return None
    if given is None:
        given = min(length, DEFAULT_CHUNK_TOKENS)
        warnings.append(
            f"max_num_batched_tokens (the compiled prefill chunk) set to {given}: set {var} to choose it"
        )
    if given > length or given < seqs:
        raise ConfigError(
            f"{var}={given}: with chunked prefill it is the compiled chunk length and must be between "
            f"max_num_seqs {seqs} and max_model_len {length}: set {var}={min(length, DEFAULT_CHUNK_TOKENS)}",
            (var,),
        )
    return given


def _max_context(
    override: dict[str, Any],
    length: int,
    chunked: bool,
    batched: int | None,
    *,
    origins: dict[str, str],
    warnings: list[str],
) -> int:
    """The longest prefill NxD Inference compiles (nxdi.max_context_length); an override of it must fit
    seq_len (nxdi config.py:136) and, shorter than max_model_len, limits prompts (said)."""
    value = nxdi.max_context_length(override, length, chunked, batched)
    var = origins.get("max_context_length", "SM_NEURON_MAX_CONTEXT_LENGTH")
    if "max_context_length" in override and not chunked:
        if not isinstance(override["max_context_length"], int) or not 0 < value <= length:
            raise ConfigError(
                f"{var}={override['max_context_length']} must be a positive integer <= "
                f"max_model_len {length}",
                (var, origins["max-model-len"]),
            )
        if value < length:
            warnings.append(f"{var}={value}: prompts longer than {value} tokens cannot be prefilled")
    return value


def _launch(
    origins: dict[str, str],
    *,
    tp: int,
    seqs: int,
    length: int,
    dtype: str,
    chunked: bool,
    batched: int | None,
    spec: Any,
) -> dict[str, tuple[Any, str]]:
    """neuron_config keys the plugin derives from the launch (vllm-neuron 0.2.0 loader.py:751-791)."""
    batch = 1 if chunked else seqs
    batch_from = (
        f"{origins['enable-chunked-prefill']}=true" if chunked else f"{origins['max-num-seqs']}={seqs}"
    )
    out: dict[str, tuple[Any, str]] = {
        "tp_degree": (tp, f"{origins['tensor-parallel-size']}={tp}"),
        "batch_size": (batch, batch_from),
        "is_continuous_batching": (batch > 1, batch_from),
        "seq_len": (length, f"{origins['max-model-len']}={length}"),
        "torch_dtype": (dtype, f"{origins['dtype']}={dtype}"),
    }
    if chunked:
        out["max_context_length"] = (batched, f"{origins['max-num-batched-tokens']}={batched}")
    try:
        cfg = json.loads(spec) if isinstance(spec, str) else None
    except ValueError:
        cfg = None
    cfg = cfg if isinstance(cfg, dict) else {}
    s_var = origins["speculative-config"]
    out["enable_fused_speculation"] = (bool(cfg), f"{s_var}={'set' if cfg else 'unset'}")
    tokens = int(cfg.get("num_speculative_tokens") or 0)
    out["speculation_length"] = (tokens, f"{s_var}=num_speculative_tokens")
    out["enable_eagle_speculation"] = (cfg.get("method") == "eagle", f"{s_var}=method")
    return out


def _draft_facts(spec: Any, facts: HostFacts) -> ModelFacts | None:
    try:
        cfg = json.loads(spec) if isinstance(spec, str) else None
    except ValueError:
        return None
    return facts.paths.get(str(cfg.get("model"))) if isinstance(cfg, dict) else None
