"""Guards for settings vllm-neuron 0.2.2+lts accepts and then ignores or fails on: vLLM quantization
methods, pipeline parallelism and multiple nodes, and speculative-config fields that are not numbers.

Each guard is a pure function of the settings and the Resolution, refusing with the variable to change
(or, for an edge a source line shows but a configuration cannot avoid, warning with the numbers). The
source judged is vllm-neuron 0.2.2+lts (vllm_neuron/..., cited as file:line) with vLLM 0.11.0's CLI
(/work/shared/vllm-0.11.0-cli.json).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from neuronserve.config.settings import Settings, env_name
from neuronserve.config.table import TOOL_PARSERS
from neuronserve.errors import ConfigError
from neuronserve.plan.jsonint import json_int
from neuronserve.plan.resolution import Resolution

# The override keys that configure NxD Inference's own quantization, read by the plugin
# (worker/neuronx_distributed_model_loader.py:888-901), each set through its SM_NEURON_<KEY> row.
QUANTIZATION_VARS = (
    "SM_NEURON_QUANTIZED=true",
    "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH=<dir>",
    "SM_NEURON_QUANTIZATION_TYPE=per_tensor_symmetric|per_channel_symmetric",
    "SM_NEURON_QUANTIZATION_DTYPE=int8|f8e4m3",
)
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


def extra_value(extra: Sequence[str], name: str) -> str | None:
    """The value of `--name` among the arguments after `--` (`--name v` or `--name=v`), last one wins
    as in argparse; None when absent."""
    found: str | None = None
    for i, tok in enumerate(extra):
        if tok == f"--{name}" and i + 1 < len(extra):
            found = extra[i + 1]
        elif tok.startswith(f"--{name}="):
            found = tok.split("=", 1)[1]
    return found


def _setting(settings: Settings, key: str) -> tuple[Any, str]:
    """(value, the variable or `-- --flag` that set it) of an engine flag, after `--` included."""
    value = settings.get(key)
    if value is not None:
        return value, settings.origin(key, env_name(key))
    given = extra_value(settings.extra_args, key)
    return given, f"-- --{key}"


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
    override keys that do quantize. The seeds say never to set `--quantization neuron_quant`.
    """
    value, origin = _setting(settings, "quantization")
    if value in (None, False):
        return
    raise ConfigError(
        f"{origin}={value}: vllm-neuron 0.2.2+lts never reads vLLM's quantization setting (NxD Inference "
        f"would compile an unquantized graph); unset {origin} and quantize through the override: set "
        f"{', '.join(QUANTIZATION_VARS)}",
        (origin, "SM_NEURON_QUANTIZED"),
    )


def check_parallelism(settings: Settings) -> None:
    """Pipeline parallelism and more than one node: refused on vllm-neuron 0.2.2+lts.

    The plugin's worker runs one process that owns the whole NxD Inference model, sharded by
    tensor parallelism only: the loader passes `tp_degree` from tensor_parallel_size and nothing
    from pipeline_parallel_size (worker/neuronx_distributed_model_loader.py:755-756), and
    platform_overrides.py:16-37 only skips vLLM's check for a pipeline-capable model. vLLM 0.11.0 has no
    `--nnodes` at all (it is not in its CLI), so SM_VLLM_NNODES reaches argparse as an unknown flag.
    Multi-node (seed 002) exists only on AWS's fork of the integration.
    """
    for key in ("pipeline-parallel-size", "nnodes"):
        value, origin = _setting(settings, key)
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
    """Speculation near max_model_len (seed 002's failure near the maximum length).

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


def check_tool_calling(settings: Settings) -> None:
    """--enable-auto-tool-choice and --tool-call-parser come together.

    vLLM 0.11.0 refuses auto tool choice without a parser at start (after the model download and, on
    Neuron, the compile), and a parser without auto tool choice is never used for `tool_choice: auto`
    requests, which vLLM then rejects: both halves are required, whatever the dialect
    (SM_VLLM_*, LMI OPTION_*, or `--` arguments). The parser name itself is not checked: vLLM 0.11.0's
    CLI lists no choices for it (/work/shared/vllm-0.11.0-cli.json), and --tool-parser-plugin may
    register more.
    """
    auto = settings.get("enable-auto-tool-choice")
    auto_origin = settings.origin("enable-auto-tool-choice", "-- --enable-auto-tool-choice")
    if auto is None and "--enable-auto-tool-choice" in settings.extra_args:
        auto = True
    parser, parser_origin = _setting(settings, "tool-call-parser")
    has_parser = parser not in (None, False, True) and str(parser).strip() != ""
    if auto is True and not has_parser:
        raise ConfigError(
            f"{auto_origin}=true needs a tool-call parser (vLLM refuses to start without one): set "
            f"SM_VLLM_TOOL_CALL_PARSER to the model's: {TOOL_PARSERS}",
            (auto_origin, "SM_VLLM_TOOL_CALL_PARSER"),
        )
    if has_parser and auto is not True:
        raise ConfigError(
            f"{parser_origin}={parser} is only used with auto tool choice: set "
            "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE=true (or OPTION_ENABLE_AUTO_TOOL_CHOICE=true), or unset "
            f"{parser_origin}",
            (parser_origin, "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE"),
        )
