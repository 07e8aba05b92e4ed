"""The numbers a Neuron launch compiles, each resolved explicitly: TP, max_model_len, max_num_seqs, dtype,
the logical NeuronCore size, the chunked-prefill chunk and the longest prefill.

Each step reads the inputs (`Launch`: settings, host facts, the model's config.json) and what earlier
steps resolved, sets one value, says in a warning what it derived, and refuses a value the plugin
would fail on later. steps.py runs them in order with the rules between them; lane 2.32's engine
(plan/lanes/native/engine.py) runs the first four (tp, model_len, seqs, dtype) too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuronserve.config.settings import Settings
from neuronserve.counts import positive
from neuronserve.errors import ConfigError
from neuronserve.plan.facts import HostFacts, ModelFacts, json_int
from neuronserve.plan.fit import cores
from neuronserve.plan.lanes.nxdi import derive, multimodal, rules
from neuronserve.plan.lanes.nxdi.models import Registry
from neuronserve.plan.lanes.nxdi.profiles import V0_2, PluginRules
from neuronserve.plan.resolution import Resolution, count
from neuronserve.types import Integration

DEFAULT_MAX_NUM_SEQS = 8
DEFAULT_DTYPE = "bfloat16"
DEFAULT_CHUNK_TOKENS = 2048  # chunked prefill's compiled chunk (max_context_length) unless set


@dataclass
class Launch:
    """The inputs of the Neuron half of the plan and the values resolved from them so far."""

    settings: Settings
    facts: HostFacts
    model_uri: str
    model: ModelFacts | None
    integration: Integration = Integration.PLUGIN  # PLUGIN or IN_TREE (intree.py)
    framework: str | None = None
    tp: int = 0
    length: int = 0
    seqs: int = 0
    dtype: str = DEFAULT_DTYPE
    batched: int | None = None
    kv_flags: list[str] = field(default_factory=list)
    max_context: int = 0
    buckets: list[int] = field(default_factory=list)
    draft: ModelFacts | None = None
    additional: dict[str, Any] = field(default_factory=dict)  # keys the plan adds to --additional-config
    # The lane's plugin profile (profiles.py), read by the rules that differ per lane; the default
    # lane's for a renderer with rules of its own (lane 2.32 runs tp/model_len/seqs/dtype with it).
    rules: PluginRules = V0_2
    registry: Registry | None = None  # the NxD Inference model registry checked against (models.py)

    @property
    def chunked(self) -> bool:
        return self.settings.get("enable-chunked-prefill") is True

    @property
    def lora(self) -> bool:
        return self.settings.get("enable-lora") is True

    @property
    def tnx(self) -> bool:
        return self.framework == "transformers-neuronx"


def tp(n: Launch, res: Resolution) -> None:
    """tensor_parallel_size: given (checked against the visible cores, rules.check_tp) or `max`/unset,
    all visible NeuronCores, or, where this host sees none, all of the declared instance's."""
    settings, facts = n.settings, n.facts
    value = settings.get("tensor-parallel-size")
    origin = settings.origin("tensor-parallel-size", "SM_VLLM_TENSOR_PARALLEL_SIZE")
    if value is None or str(value).lower() == "max":
        instance = cores.declared_instance(settings) if facts.visible_cores is None else None
        if instance is not None:
            # Planning off the instance (a laptop, a deploy dry run): the declared type alone says how many
            # NeuronCores the container will see (plan/fit/instances.py), logical ones on Trn2.
            res.warn(
                f"tensor_parallel_size set to all {instance.cores} NeuronCores of "
                f"{cores.INSTANCE_VAR}={settings.fit.instance_type} (no NeuronCore visible on this host)"
            )
            n.tp = instance.cores
            return
        if facts.visible_cores is None:
            raise ConfigError(
                "cannot tell how many NeuronCores are visible (no /dev/neuron*, no "
                "NEURON_RT_VISIBLE_CORES): set "
                "SM_VLLM_TENSOR_PARALLEL_SIZE (e.g. 2) or NEURON_RT_VISIBLE_CORES (e.g. 0-1), or name the "
                f"instance ({cores.INSTANCE_VAR}, `plan --instance-type`, e.g. ml.inf2.xlarge)",
                ("SM_VLLM_TENSOR_PARALLEL_SIZE", "NEURON_RT_VISIBLE_CORES", cores.INSTANCE_VAR),
            )
        res.warn(
            f"tensor_parallel_size set to all {facts.visible_cores} visible NeuronCores "
            f"({facts.cores_source})"
        )
        n.tp = facts.visible_cores
        return
    n.tp = count(settings, "tensor-parallel-size") or 0
    rules.check_tp(n.tp, origin, facts.visible_cores, facts.cores_source)
    if facts.visible_cores is None:
        res.warn(f"{origin}={n.tp} not checked against the visible NeuronCores (none found on this host)")


def model_len(n: Launch, res: Resolution) -> None:
    """max_model_len: given, else config.json's max_position_embeddings (said), else refused: the plugin
    compiles one fixed length and does not derive it."""
    given = count(n.settings, "max-model-len")
    if given:
        n.length = given
        return
    config = (n.model.config if n.model else None) or {}
    derived = config.get("max_position_embeddings") or (config.get("text_config") or {}).get(
        "max_position_embeddings"
    )
    if json_int(derived) and derived > 0:  # JSON true is no length
        res.warn(
            f"max_model_len derived from {n.model_uri}/config.json max_position_embeddings = {derived}; "
            f"set SM_VLLM_MAX_MODEL_LEN to compile for a shorter length (faster, less memory)"
        )
        n.length = derived
        return
    raise ConfigError(
        "max_model_len is required on Neuron (the plugin compiles one fixed length and does "
        "not derive it) and "
        f"{n.model_uri} has no local config.json to derive it from: set SM_VLLM_MAX_MODEL_LEN (e.g. 4096)",
        ("SM_VLLM_MAX_MODEL_LEN",),
    )


def seqs(n: Launch, res: Resolution) -> None:
    """max_num_seqs, the compiled batch size: given, else DEFAULT_MAX_NUM_SEQS (said). For Pixtral on a
    plugin that caps its batch (0.2.2+lts: 4, loader :442-447) the default is that cap: the plan's own
    default would otherwise be refused naming a variable the user never set."""
    given = count(n.settings, "max-num-seqs")
    if given is None:
        cap = n.rules.pixtral_max_seqs if multimodal.architecture(n.model) == multimodal.PIXTRAL else None
        given = min(DEFAULT_MAX_NUM_SEQS, cap) if cap else DEFAULT_MAX_NUM_SEQS
        res.warn(f"max_num_seqs defaulted to {given} (the compiled batch size): set SM_VLLM_MAX_NUM_SEQS")
    n.seqs = given


def dtype(n: Launch, res: Resolution) -> None:
    """dtype: given (rules.check_dtype refuses `auto`) or bfloat16."""
    n.dtype = str(n.settings.get("dtype") or DEFAULT_DTYPE)
    rules.check_dtype(n.dtype, n.settings.origin("dtype", "SM_VLLM_DTYPE"))


def logical_nc(n: Launch, res: Resolution) -> None:
    """NEURON_LOGICAL_NC_CONFIG becomes the override's logical_nc_config; both given must agree."""
    text = n.settings.logical_nc_config
    if not text:
        return
    lnc = positive(text)  # 0 was compiled into the override
    if lnc is None:
        raise ConfigError(
            f"NEURON_LOGICAL_NC_CONFIG={text!r} must be a positive integer (physical NeuronCores per "
            "logical core: 1, or 2 on Trn2)",
            ("NEURON_LOGICAL_NC_CONFIG",),
        )
    if res.override.setdefault("logical_nc_config", lnc) != lnc:
        raise ConfigError(
            f"NEURON_LOGICAL_NC_CONFIG={lnc} and override logical_nc_config="
            f"{res.override['logical_nc_config']} disagree: set one of them",
            ("NEURON_LOGICAL_NC_CONFIG", res.origins.get("logical_nc_config", "")),
        )


def batched_tokens(n: Launch, res: Resolution) -> None:
    """max_num_batched_tokens is compiled only under chunked prefill, so it is chosen here then.

    vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:737-739: with chunked prefill it
    becomes max_context_length (the chunk the graph is traced for), so leaving it to vLLM's default
    would compile a number nobody chose.
    Without chunked prefill the custom scheduler overwrites it with 131072 (platform.py:259-260): a
    configured value is dropped with a warning. NxD Inference asserts max_context_length <= seq_len
    (nxdi config.py:136), and vLLM needs it >= max_num_seqs.
    """
    var = res.origins["max-num-batched-tokens"]
    given = count(n.settings, "max-num-batched-tokens")
    if not n.chunked:
        if given is not None:
            res.warn(
                f"{var} ignored: without chunked prefill the plugin's scheduler sets "
                f"max_num_batched_tokens to {derive.CUSTOM_SCHEDULER_TOKENS}"
            )
        return
    if given is None:
        given = min(n.length, DEFAULT_CHUNK_TOKENS)
        res.warn(
            f"max_num_batched_tokens (the compiled prefill chunk) set to {given}: set {var} to choose it"
        )
    if given > n.length or given < n.seqs:
        raise ConfigError(
            f"{var}={given}: with chunked prefill it is the compiled chunk length and must be between "
            f"max_num_seqs {n.seqs} and max_model_len {n.length}: set "
            f"{var}={min(n.length, DEFAULT_CHUNK_TOKENS)}",
            (var,),
        )
    n.batched = given


def max_context(n: Launch, res: Resolution) -> None:
    """The longest prefill NxD Inference compiles (derive.max_context_length); an override of it must fit
    seq_len (nxdi config.py:136) and, shorter than max_model_len, limits prompts.

    A prompt longer than it raises ValueError inside the engine step, which stops the engine
    (vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_runner.py:848-858, continuous batching),
    unless additional_config has max_prompt_length: vLLM's OpenAI server then answers it with a 400
    (platform.py:217-218, platform_overrides.py:62-77 and 83-98). So when the override shortens the
    prefill the plan adds max_prompt_length itself (n.additional) and says so; the user's own
    max_prompt_length is checked in prompt_length.
    """
    override, length = res.override, n.length
    prompt = prompt_length(n, res)
    value = derive.max_context_length(override, length, n.chunked, n.batched, prompt)
    var = res.origins.get("max_context_length", "SM_NEURON_MAX_CONTEXT_LENGTH")
    given = override.get("max_context_length")
    if given is not None and not n.chunked and (not json_int(given) or not 0 < value <= length):
        raise ConfigError(
            f"{var}={given} must be a positive integer <= max_model_len {length}",
            (var, res.origins["max-model-len"]),
        )
    if value < length and not n.chunked:
        if prompt is not None:
            res.warn(f"{PROMPT_VAR} max_prompt_length={value}: prompts longer than {value} tokens get a 400")
        elif n.integration == Integration.PLUGIN and not multimodal.nested(
            n.model, n.rules
        ):  # nested: refused there
            n.additional["max_prompt_length"] = value
            res.warn(
                f"{var}={value}: prompts longer than {value} tokens cannot be prefilled; max_prompt_length "
                f"{value} added to --additional-config so they get a 400 instead of stopping the engine"
            )
        else:
            res.warn(f"{var}={value}: prompts longer than {value} tokens cannot be prefilled")
    n.max_context = value


PROMPT_VAR = "SM_VLLM_ADDITIONAL_CONFIG"


def prompt_length(n: Launch, res: Resolution) -> int | None:
    """additional_config max_prompt_length, which vllm-neuron 0.2.2+lts compiles as max_context_length.

    platform.py:217-218 reads it; the loader raises ValueError when the override's max_context_length
    differs from it, then writes it there (worker/neuronx_distributed_model_loader.py:926-940), which
    :880 merges over the launch's own (:737-742). So it must be a whole number within max_model_len
    (nxdi config.py:136), agree with an override max_context_length, and under chunked prefill, where
    max_context_length is the chunk vLLM schedules (max_num_batched_tokens), equal that chunk; a
    different one is refused. Only the plugin reads it (the in-tree integration has no additional_config).
    """
    given = n.settings.additional_config.get("max_prompt_length")
    if n.integration != Integration.PLUGIN or given is None:
        return None
    m_var = res.origins["max-model-len"]
    if not json_int(given) or not 0 < given <= n.length:
        raise ConfigError(
            f"{PROMPT_VAR} max_prompt_length={given} must be a positive integer <= max_model_len {n.length}",
            (PROMPT_VAR, m_var),
        )
    context = res.override.get("max_context_length")
    if context is not None and context != given:
        c_var = res.origins.get("max_context_length", "SM_NEURON_MAX_CONTEXT_LENGTH")
        raise ConfigError(
            f"{PROMPT_VAR} max_prompt_length={given} and {c_var}={context} disagree: vllm-neuron 0.2.2+lts "
            "raises at load when they differ (worker/neuronx_distributed_model_loader.py:929-938): "
            f"remove {c_var}, or give both one value",
            (PROMPT_VAR, c_var),
        )
    if n.chunked and given != n.batched:
        b_var = res.origins["max-num-batched-tokens"]
        raise ConfigError(
            f"{PROMPT_VAR} max_prompt_length={given}: with chunked prefill vllm-neuron 0.2.2+lts compiles it "
            f"as the chunk, but vLLM schedules chunks of {b_var}={n.batched}: remove max_prompt_length, or "
            f"set {b_var}={given}",
            (PROMPT_VAR, b_var),
        )
    res.origins.setdefault("max_context_length", PROMPT_VAR)
    return given


def launch_keys(n: Launch, res: Resolution) -> dict[str, tuple[Any, str]]:
    """neuron_config keys the plugin derives from the launch (vllm-neuron 0.2.2+lts
    worker/neuronx_distributed_model_loader.py:754-794),
    each with the setting that decides it (for overrides.check_launch_duplicates)."""
    origins = res.origins
    batch = 1 if n.chunked else n.seqs
    batch_from = (
        f"{origins['enable-chunked-prefill']}=true" if n.chunked else f"{origins['max-num-seqs']}={n.seqs}"
    )
    out: dict[str, tuple[Any, str]] = {
        "tp_degree": (n.tp, f"{origins['tensor-parallel-size']}={n.tp}"),
        "batch_size": (batch, batch_from),
        "is_continuous_batching": (batch > 1, batch_from),
        "seq_len": (n.length, f"{origins['max-model-len']}={n.length}"),
        "torch_dtype": (n.dtype, f"{origins['dtype']}={n.dtype}"),
    }
    if n.chunked:
        out["max_context_length"] = (n.batched, f"{origins['max-num-batched-tokens']}={n.batched}")
    cfg = res.speculation.config or {}
    s_var = origins["speculative-config"]
    out["enable_fused_speculation"] = (bool(cfg), f"{s_var}={'set' if cfg else 'unset'}")
    tokens = int(cfg.get("num_speculative_tokens") or 0)
    out["speculation_length"] = (tokens, f"{s_var}=num_speculative_tokens")
    out["enable_eagle_speculation"] = (cfg.get("method") == "eagle", f"{s_var}=method")
    return out
