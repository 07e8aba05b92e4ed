"""The one table of configuration variables: parsing, precedence and the README reference all read it.

Each row (a `Var`) names a variable, the setting it feeds, its typed default, the parser that turns its
text into that type and the convention it comes from. `settings.py`, `serve.py` and `fit.py` read
values through these rows and `doc.py` renders them, so neither the parsing nor the README can drift
from the table (a test compares the README with it; another walks the source for every variable read
and looks each one up here). The engine settings' rows are here; the variables read by name are in
hosttable.py (NEURONSERVE_*), runtimetable.py (Neuron runtime, SageMaker) and awstable.py (the AWS
SDK's, read for the S3 and Secrets Manager clients and s5cmd), gathered below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from neuronserve.config import values as p
from neuronserve.config.awstable import AWS_VARS
from neuronserve.config.hosttable import NEURONSERVE_VARS
from neuronserve.config.runtimetable import RUNTIME_VARS
from neuronserve.config.var import LMI, NEURON, OVERRIDE_PATTERN, SM, SM_PATTERN, STREAM_FORMATS, TGI, Var

# Precedence (highest first), used for the origin a value is reported with and for the model choice.
# Two sources giving the same setting different values is an error naming both variables.
PRECEDENCE = (
    "engine arguments after `--`",
    "`SM_VLLM_*` (AWS vLLM SageMaker image convention)",
    "`SM_NEURON_<KEY>`, then `SM_NEURON_OVERRIDE_CONFIG`, then `SM_VLLM_ADDITIONAL_CONFIG` (override keys)",
    "`serving.properties` `option.*` (LMI): the served model directory's, then `SM_MODEL_DIR`'s",
    "`OPTION_*` and `TENSOR_PARALLEL_DEGREE` (LMI)",
    "`HF_*` / `MAX_*` (TGI and Hugging Face containers)",
    "neuronserve defaults (Neuron plan only)",
)

_SMV = p.sm_vllm
_SWITCH = p.sm_vllm_switch  # an SM_VLLM_* flag without a value: true, false or empty
# vLLM 0.11.0's tool-call parser for each model family the plugin serves (documented in the README).
TOOL_PARSERS = (
    "`llama3_json` for Llama 3.x, `llama4_pythonic` for Llama 4, `hermes` for Qwen2/Qwen3, "
    "`mistral` for Mixtral"
)

# Engine settings the plan reasons about; any other SM_VLLM_<NAME> passes through as --<name>.
ENGINE_VARS: tuple[Var, ...] = (
    Var(
        "SM_VLLM_MODEL",
        "<model>",
        None,
        SM,
        "Model: hub id, local dir, s3:// prefix or .tar.gz (first in source order)",
    ),
    Var(
        SM_PATTERN,
        "<name>",
        None,
        SM,
        "Any vLLM flag `--<name>` of the engine's vLLM (else refused): true = bare flag, false = omitted, "
        "empty = bare flag, JSON array = one token each, JSON object = one token",
        _SMV,
    ),
    Var(
        "SM_VLLM_TENSOR_PARALLEL_SIZE",
        "tensor-parallel-size",
        None,
        SM,
        "NeuronCores the model is sharded over (Neuron: <= visible cores)",
        _SMV,
        default_doc="all visible NeuronCores",
    ),
    Var(
        "SM_VLLM_MAX_MODEL_LEN",
        "max-model-len",
        None,
        SM,
        "Compiled sequence length (always passed on Neuron)",
        _SMV,
        default_doc="config.json max_position_embeddings",
    ),
    Var(
        "SM_VLLM_MAX_NUM_SEQS",
        "max-num-seqs",
        None,
        SM,
        "Compiled batch size (always passed on Neuron)",
        _SMV,
        default_doc="8 on Neuron",
    ),
    Var(
        "SM_VLLM_DTYPE",
        "dtype",
        None,
        SM,
        "Weights/activations dtype (`auto` is refused on Neuron)",
        _SMV,
        default_doc="bfloat16 on Neuron",
    ),
    Var(
        "SM_VLLM_ENABLE_PREFIX_CACHING",
        "enable-prefix-caching",
        None,
        SM,
        "Prefix caching with a block KV layout (else `--no-enable-prefix-caching`)",
        _SWITCH,
        default_doc="false on Neuron",
    ),
    Var(
        "SM_VLLM_BLOCK_SIZE",
        "block-size",
        None,
        SM,
        "KV block size (prefix caching, chunked prefill); the plugin uses max_model_len otherwise",
        _SMV,
        default_doc="32 with prefix caching",
    ),
    Var(
        "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE",
        "num-gpu-blocks-override",
        None,
        SM,
        "KV blocks (the plugin adds a null block); counted in max_model_len blocks without prefix caching",
        _SMV,
        default_doc="ceil(max_model_len/block)*max_num_seqs",
    ),
    Var(
        "SM_VLLM_ENABLE_CHUNKED_PREFILL",
        "enable-chunked-prefill",
        False,
        SM,
        "Chunked prefill (Neuron: needs chunked_prefill_config; sets DISABLE_NEURON_CUSTOM_SCHEDULER=1)",
        _SWITCH,
    ),
    Var(
        "SM_VLLM_ADDITIONAL_CONFIG",
        "additional-config",
        {},
        SM,
        "JSON object; its override_neuron_config merges with the SM_NEURON_* keys",
        p.json_object,
    ),
    Var(
        "SM_VLLM_REVISION",
        "revision",
        None,
        SM,
        "Hub revision (hub models only; on Neuron the model is staged to a directory at that revision)",
        _SMV,
    ),
    Var(
        "SM_VLLM_TRUST_REMOTE_CODE", "trust-remote-code", False, SM, "Allow model code from the hub", _SWITCH
    ),
    Var(
        "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE",
        "enable-auto-tool-choice",
        None,
        SM,
        "Tool calling (`tool_choice: auto`); needs SM_VLLM_TOOL_CALL_PARSER",
        _SWITCH,
    ),
    Var(
        "SM_VLLM_TOOL_CALL_PARSER",
        "tool-call-parser",
        None,
        SM,
        f"Tool-call parser (needs SM_VLLM_ENABLE_AUTO_TOOL_CHOICE=true): {TOOL_PARSERS}",
        _SMV,
    ),
    Var(
        "SM_VLLM_ENABLE_LORA",
        "enable-lora",
        False,
        SM,
        "LoRA adapters (name them in SM_VLLM_LORA_MODULES; Neuron: vllm-neuron 0.2.2+lts, and every request "
        "must name an adapter)",
        _SWITCH,
    ),
    Var(
        "SM_VLLM_LORA_MODULES",
        "lora-modules",
        None,
        SM,
        'Adapters as `name=path` separated by blanks (or vLLM\'s JSON {"name", "path"}); a path is '
        "s3://, a local dir or a .tar.gz (a hub id is staged on Neuron), staged to "
        "<work>/assets/lora/<name>; on Neuron the plan writes the plugin's lora_ckpt_json",
        _SMV,
    ),
    Var(
        "SM_VLLM_MAX_LORAS",
        "max-loras",
        None,
        SM,
        "Adapters per batch (Neuron: adapters on device; more adapters need SM_VLLM_MAX_CPU_LORAS)",
        _SMV,
        default_doc="the adapter count on Neuron, else 1",
    ),
    Var("SM_VLLM_MAX_LORA_RANK", "max-lora-rank", None, SM, "Highest adapter rank: 1, 8, 16, ... 512", _SMV),
    Var(
        "SM_VLLM_MAX_CPU_LORAS",
        "max-cpu-loras",
        None,
        SM,
        "Adapters held in host memory (>= max_loras; Neuron: swapped onto the device as requests need them)",
        _SMV,
        default_doc="max_loras",
    ),
    Var(
        "SM_VLLM_CHAT_TEMPLATE",
        "chat-template",
        None,
        SM,
        "Chat template text (holding {, } or a newline), or a file: a local path or an s3:// object "
        "(staged to <work>/assets/chat_template/)",
        _SMV,
    ),
    Var(
        "SM_NEURON_OVERRIDE_CONFIG",
        "<override>",
        {},
        NEURON,
        "JSON object merged into override_neuron_config",
        p.json_object,
    ),
    Var(
        "SM_VLLM_OVERRIDE_NEURON_CONFIG",
        "<override>",
        {},
        NEURON,
        "Same as SM_NEURON_OVERRIDE_CONFIG (the in-tree flag's name)",
        p.json_object,
    ),
    Var(
        OVERRIDE_PATTERN,
        "<override>",
        None,
        NEURON,
        "One override_neuron_config key (lowercased); true/false in any case are booleans, else JSON "
        "when it parses, else a string",
        p.override_value,
    ),
    Var("OPTION_MODEL_ID", "<model>", None, LMI, "Model (last in source order)", field="dialect.lmi_model"),
    Var(
        "OPTION_TENSOR_PARALLEL_DEGREE",
        "tensor-parallel-size",
        None,
        LMI,
        "`max` = all visible cores",
        p.lmi_cores,
    ),
    Var(
        "TENSOR_PARALLEL_DEGREE",
        "tensor-parallel-size",
        None,
        LMI,
        "Same as OPTION_TENSOR_PARALLEL_DEGREE",
        p.lmi_cores,
    ),
    Var("OPTION_MAX_ROLLING_BATCH_SIZE", "max-num-seqs", None, LMI, "Batch size", p.lmi_count),
    Var("OPTION_N_POSITIONS", "max-model-len", None, LMI, "Sequence length", p.lmi_count),
    Var("OPTION_MAX_MODEL_LEN", "max-model-len", None, LMI, "Sequence length", p.lmi_count),
    Var("OPTION_DTYPE", "dtype", None, LMI, "fp16 / bf16 / fp32 or a vLLM dtype", p.lmi_dtype),
    Var(
        "OPTION_TRUST_REMOTE_CODE",
        "trust-remote-code",
        None,
        LMI,
        "Allow model code from the hub",
        p.lmi_bool,
    ),
    Var("OPTION_REVISION", "revision", None, LMI, "Hub revision"),
    Var(
        "OPTION_ENABLE_AUTO_TOOL_CHOICE",
        "enable-auto-tool-choice",
        None,
        LMI,
        "Same as SM_VLLM_ENABLE_AUTO_TOOL_CHOICE",
        p.lmi_bool,
    ),
    Var("OPTION_TOOL_CALL_PARSER", "tool-call-parser", None, LMI, "Same as SM_VLLM_TOOL_CALL_PARSER"),
    Var("OPTION_ENABLE_LORA", "enable-lora", None, LMI, "Same as SM_VLLM_ENABLE_LORA", p.lmi_bool),
    Var("OPTION_MAX_LORAS", "max-loras", None, LMI, "Same as SM_VLLM_MAX_LORAS", p.lmi_count),
    Var("OPTION_MAX_LORA_RANK", "max-lora-rank", None, LMI, "Same as SM_VLLM_MAX_LORA_RANK", p.lmi_count),
    Var("OPTION_MAX_CPU_LORAS", "max-cpu-loras", None, LMI, "Same as SM_VLLM_MAX_CPU_LORAS", p.lmi_count),
    Var(
        "OPTION_QUANTIZE",
        "quantization",
        None,
        LMI,
        "Read as vLLM's `--quantization`: refused on Neuron with the NxD Inference keys that quantize there",
    ),
    Var("HF_REVISION", "revision", None, LMI, "Hub revision"),
    Var("OPTION_COMPILED_GRAPH_PATH", "<artifacts>", None, LMI, "Same as NEURON_COMPILED_ARTIFACTS"),
    Var("OPTION_ROLLING_BATCH", "", None, LMI, "Accepted and ignored (always vLLM)"),
    Var("OPTION_ENTRYPOINT", "", None, LMI, "Accepted and ignored"),
    Var("OPTION_ENGINE", "", None, LMI, "Accepted and ignored"),
    Var(
        "OPTION_TGI_COMPAT",
        "",
        False,
        LMI,
        "true: generate answers in TGI's shapes (dialect `tgi`)",
        p.lmi_bool,
        "dialect.tgi_compat",
    ),
    Var(
        "OPTION_OUTPUT_FORMATTER",
        "",
        "jsonlines",
        LMI,
        "LMI dialect stream format: jsonlines | sse",
        p.choice(*STREAM_FORMATS),
        "serve.lmi_stream_format",
    ),
    Var("HF_MODEL_ID", "<model>", None, TGI, "Model: hub id, local path or s3:// prefix"),
    Var("HF_MODEL_REVISION", "revision", None, TGI, "Hub revision"),
    Var(
        "HF_MODEL_TRUST_REMOTE_CODE",
        "trust-remote-code",
        None,
        TGI,
        "Allow model code from the hub",
        p.lmi_bool,
    ),
    Var("HF_NUM_CORES", "tensor-parallel-size", None, TGI, "NeuronCores (TGI on Neuron)", p.lmi_cores),
    Var("HF_BATCH_SIZE", "max-num-seqs", None, TGI, "Compiled batch size (TGI on Neuron)", p.lmi_count),
    Var(
        "HF_SEQUENCE_LENGTH",
        "max-model-len",
        None,
        TGI,
        "Compiled sequence length (TGI on Neuron)",
        p.lmi_count,
    ),
    Var("MAX_BATCH_SIZE", "max-num-seqs", None, TGI, "Batch size (TGI on Neuron)", p.lmi_count),
    Var("MAX_TOTAL_TOKENS", "max-model-len", None, TGI, "Sequence length (TGI on Neuron)", p.lmi_count),
    Var("HF_AUTO_CAST_TYPE", "dtype", None, TGI, "bf16 / fp16 / fp32 (TGI on Neuron)", p.lmi_dtype),
    Var(
        "HF_MODEL_QUANTIZE",
        "quantization",
        None,
        TGI,
        "TGI's quantize setting, read as vLLM's `--quantization`: refused on Neuron like OPTION_QUANTIZE",
    ),
    Var("QUANTIZE", "quantization", None, TGI, "Same as HF_MODEL_QUANTIZE (TGI launcher's name)"),
)

HOST_VARS = NEURONSERVE_VARS + RUNTIME_VARS + AWS_VARS  # read by name (the README's second table)
VARS: dict[str, Var] = {v.name: v for v in (*ENGINE_VARS, *HOST_VARS)}  # every row, by name
LMI_VARS = {v.name: v for v in ENGINE_VARS if v.source == LMI}
TGI_VARS = {v.name: v for v in ENGINE_VARS if v.source == TGI}
FIELDS: dict[str, Var] = {v.field: v for v in HOST_VARS + ENGINE_VARS if v.field.count(".") == 1}
ENGINE_ENV = tuple(v for v in HOST_VARS if v.field == "engine_env")  # passed to the engine as given
HOST_ENGINE_VARS = tuple(v for v in HOST_VARS if v.key and not v.key.startswith("<"))  # e.g. DP size

# Flags whose vLLM default is "on": `false` must become `--no-<flag>` instead of being omitted.
DEFAULT_ON_FLAGS = frozenset({"enable-prefix-caching", "use-tqdm-on-load"})


def rows_of(group: str) -> dict[str, Var]:
    """{field attribute: row} of one group (`serve`, `fit`, `settings`)."""
    prefix = group + "."
    return {f.removeprefix(prefix): v for f, v in FIELDS.items() if f.startswith(prefix)}


def defaults(group: str) -> dict[str, Any]:
    """{field attribute: typed default} of one group: the dataclass defaults of ServeOptions etc."""
    return {attr: v.default for attr, v in rows_of(group).items()}


def read_group(environ: Mapping[str, str], group: str, order: tuple[str, ...]) -> dict[str, Any]:
    """{attribute: typed value} for the attributes `order` names, read (and checked) in that order."""
    rows = rows_of(group)
    return {attr: rows[attr].read(environ) for attr in order}
