"""Guards for settings vllm-neuron 0.2.2+lts accepts and then ignores or fails on: vLLM quantization
methods, pipeline parallelism and multiple nodes, and speculative-config fields that are not numbers.

Each guard is a pure function of the settings and the Resolution, refusing with the variable to change
(or, for an edge a source line shows but a configuration cannot avoid, warning with the numbers). The
source judged is vllm-neuron 0.2.2+lts (vllm_neuron/..., cited as file:line) with vLLM 0.11.0's CLI
(src/neuronserve/data/vllm-0.11.0-cli.json). The tool-calling flags, checked on every device, are
plan/command.py's.
"""

from __future__ import annotations

import json
from typing import Any

from neuronserve.config.settings import Settings
from neuronserve.errors import ConfigError
from neuronserve.plan.command import setting_of
from neuronserve.plan.facts import json_int
from neuronserve.plan.resolution import Resolution

# The override keys that configure NxD Inference's own quantization, read by the plugin
# (worker/neuronx_distributed_model_loader.py:888-901), each set through its SM_NEURON_<KEY> row.
QUANTIZATION_VARS = (
    "SM_NEURON_QUANTIZED=true",
    "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH=<dir>",
    "SM_NEURON_QUANTIZATION_TYPE=per_tensor_symmetric|per_channel_symmetric",
    "SM_NEURON_QUANTIZATION_DTYPE=int8|f8e4m3",
)
QUANTIZED_PATH = "quantized_checkpoints_path"
# Integer fields of vLLM 0.11.0's SpeculativeConfig that the plan or the plugin reads as numbers
# (launch.launch_keys reads num_speculative_tokens; the plugin's loader :789-793, runner :965-967).
SPECULATIVE_INTS = (
    "num_speculative_tokens",
    "draft_tensor_parallel_size",
    "max_model_len",
    "prompt_lookup_max",
    "prompt_lookup_min",
    "disable_by_batch_size",
)
MULTI_NODE_FORK = (
    "multi-node serving exists only on AWS's fork of the vLLM Neuron integration (aws-neuron/"
    "upstreaming-to-vllm, branch neuron-2.23-vllm-v0.7.2), not in vllm-neuron 0.2.2+lts"
)


def check_quantization(settings: Settings) -> None:
    """vLLM's --quantization on the plugin: refused, whatever the method.

    vllm_neuron/platform.py:31 lists `neuron_quant` and `fbgemm_fp8` as supported and :109 replaces
    vLLM's quantization check with a no-op (platform_overrides.py:41-42), so vLLM accepts either. But
    nothing in vllm-neuron 0.2.2+lts reads vLLM's quantization config: the loader builds NxD Inference's
    neuron_config from its own defaults (`"quantized": False`, loader :768-769) and the override keys
    `quantized`, `quantized_checkpoints_path`, `quantization_type`, `quantization_dtype` (:888-901), and
    the runner reads only the override's `quantized` (runner :190-191). So `neuron_quant` and
    `fbgemm_fp8` alike compile an unquantized graph of a checkpoint vLLM was told is quantized (an
    fbgemm_fp8 checkpoint's FP8 weights would be read as plain weights): both are refused with the
    override keys that do quantize.
    """
    value, origin = setting_of(settings, "quantization")
    if value in (None, False):
        return
    raise ConfigError(
        f"{origin}={value}: vllm-neuron 0.2.2+lts never reads vLLM's quantization setting (NxD Inference "
        f"would compile an unquantized graph); unset {origin} and quantize through the override: set "
        f"{', '.join(QUANTIZATION_VARS)}",
        (origin, "SM_NEURON_QUANTIZED"),
    )


def check_quantized_path(res: Resolution) -> None:
    """`quantized` needs the directory NxD Inference reads (or writes) the quantized weights in.

    The loader takes the quantization keys from the override when `quantized` is there and fills a
    missing `quantized_checkpoints_path` with None (vllm-neuron 0.2.2+lts
    worker/neuronx_distributed_model_loader.py:888-901; 0.4.1 :1226-1240), and NxD Inference's
    NeuronConfig asserts "quantized_checkpoints_path is required" when quantized is true (NxD Inference
    0.7.14366 models/config.py:200-203, 2.28.0 :216-221): the engine fails at load, after the
    download. An empty path names no directory either. Refused, naming the path's variable."""
    override = res.override
    if not override.get("quantized"):
        return
    path = override.get(QUANTIZED_PATH)
    if isinstance(path, str) and path.strip():
        return
    var = res.origin("quantized")
    path_var = res.origin(QUANTIZED_PATH)
    raise ConfigError(
        f"{var}=true needs a quantized checkpoint directory: set {path_var}=<dir> (s3://, a local "
        "directory or a .tar.gz; a local directory that does not exist yet is where NxD Inference writes "
        'the quantized weights): NxD Inference asserts "quantized_checkpoints_path is required" at load',
        (var, path_var),
    )


def check_parallelism(settings: Settings) -> None:
    """Pipeline parallelism and more than one node: refused on vllm-neuron 0.2.2+lts.

    The plugin's worker runs one process that owns the whole NxD Inference model, sharded by
    tensor parallelism only: the loader passes `tp_degree` from tensor_parallel_size and nothing
    from pipeline_parallel_size (worker/neuronx_distributed_model_loader.py:755-756), and
    platform_overrides.py:16-37 only skips vLLM's check for a pipeline-capable model. vLLM 0.11.0 has no
    `--nnodes` at all (it is not in its CLI), so SM_VLLM_NNODES reaches argparse as an unknown flag.
    Multi-node serving exists only on AWS's fork of the integration (MULTI_NODE_FORK).
    """
    for key in ("pipeline-parallel-size", "nnodes"):
        value, origin = setting_of(settings, key)
        if value in (None, False):
            continue
        text = str(value).strip()
        if text.isdecimal() and int(text) <= 1:
            continue
        what = "pipeline parallelism" if key == "pipeline-parallel-size" else "more than one node"
        raise ConfigError(
            f"{origin}={value}: {what} is not supported by vllm-neuron 0.2.2+lts ({MULTI_NODE_FORK}): "
            f"unset {origin} (or set it to 1) and shard with SM_VLLM_TENSOR_PARALLEL_SIZE on one instance",
            (origin,),
        )


def check_speculative_fields(settings: Settings, res: Resolution) -> None:
    """--speculative-config must be a JSON object whose number fields are integers.

    launch.launch_keys reads num_speculative_tokens as an int (it becomes speculation_length, loader
    worker/neuronx_distributed_model_loader.py:789-793) and the runner loops over it (runner :965-967):
    "abc", 2.5 or true crashed the plan with a ValueError traceback (or compiled speculation_length 1
    for true). A value that is JSON but not an object (a list, or `true`: SM_VLLM_* reads JSON lists and
    booleans as flag tokens) reached vLLM as is. A `model` that is not a non-empty string (5, "") is
    no draft the stager can fetch nor one the loader can read (loader :293-301 takes it as a path), and
    was passed to vLLM as given.
    """
    spec, origin = res.speculation, res.origins["speculative-config"]
    given = settings.get("speculative-config")
    not_text = given is not None and given is not False and not isinstance(given, str)
    if spec.invalid or not_text or (spec.text is not None and spec.config is None):
        raise ConfigError(f"{origin} must be a JSON object", (origin,))
    draft = (spec.config or {}).get("model")
    if draft is not None and (not isinstance(draft, str) or not draft.strip()):
        raise ConfigError(
            f"{origin}: model={json_text(draft)} must name the draft model as a string: an s3:// URI, a "
            "local directory, a .tar.gz or a hub id",
            (origin,),
        )
    for key in SPECULATIVE_INTS:
        value = (spec.config or {}).get(key)
        if value is None:
            continue
        if not json_int(value) or value < (1 if key != "disable_by_batch_size" else 0):
            raise ConfigError(
                f"{origin}: {key}={json_text(value)} must be a positive integer (a JSON number such as 4)",
                (origin,),
            )


def warn_speculation_edge(length: int, res: Resolution) -> None:
    """Speculation near max_model_len: a request may fail in the engine near the maximum length.

    With speculation the runner writes num_speculative_tokens consecutive KV slots from a sequence's
    last position (worker/neuronx_distributed_model_runner.py:963-967) and asserts that the accepted
    tokens stay within max_model_len (:455-460, "Sampled token IDs exceed the max model length"). A
    request whose prompt + max_tokens comes within num_speculative_tokens of max_model_len can therefore
    fail inside the engine step. No setting avoids it: said with the numbers.
    """
    cfg = res.speculation.config
    if not cfg:
        return
    tokens = cfg.get("num_speculative_tokens")
    if not json_int(tokens) or tokens < 1:
        return
    res.warn(
        f"speculative decoding with num_speculative_tokens={tokens}: a request whose prompt + max_tokens "
        f"exceeds {length - tokens} (max_model_len {length} - {tokens}) may fail in the engine near the "
        f"maximum length (vllm-neuron 0.2.2+lts writes {tokens} slots past the last position): keep "
        f"prompt + max_tokens <= {length - tokens}, or raise {res.origins['max-model-len']}"
    )


def json_text(value: Any) -> str:
    """A value as JSON writes it (true, "abc", 2.5), so the message shows what was given."""
    return json.dumps(value)
