"""The one table of configuration variables: parsing, precedence and the README reference all read it.

Each row says which environment variable (or file key) sets which engine setting, its default and
which convention it comes from. `settings.py` maps values with these rows and `doc.py` renders
them, so the documentation cannot drift from the code (a test compares the README with the table).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Var:
    """One configuration variable.

    `key` is the engine setting it feeds (a vLLM flag name without `--`), or a neuronserve setting
    in angle brackets (e.g. `<model>`), or "" for variables read directly by name.
    """

    name: str
    key: str
    default: str
    source: str
    help: str
    kind: str = "str"  # str | int | bool | dtype | tp (an int or "max") | model


# Precedence (highest first), used for the origin a value is reported with and for the model choice.
# Two sources giving the same setting different values is an error naming both variables.
PRECEDENCE = (
    "engine arguments after `--`",
    "`SM_VLLM_*` (AWS vLLM SageMaker image convention)",
    "`SM_NEURON_<KEY>`, then `SM_NEURON_OVERRIDE_CONFIG`, then `SM_VLLM_ADDITIONAL_CONFIG` (override keys)",
    "`serving.properties` `option.*` in the model directory (LMI)",
    "`OPTION_*` and `TENSOR_PARALLEL_DEGREE` (LMI)",
    "`HF_*` / `MAX_*` (TGI and Hugging Face containers)",
    "neuronserve defaults (Neuron plan only)",
)

SM = "SM_VLLM (AWS vLLM DLC)"
NEURON = "Neuron override"
LMI = "LMI (DJL)"
TGI = "TGI / HF"
NS = "neuronserve"
SAGEMAKER = "SageMaker"
NRT = "Neuron runtime"

# Engine settings the plan reasons about; any other SM_VLLM_<NAME> passes through as --<name>.
ENGINE_VARS: tuple[Var, ...] = (
    Var(
        "SM_VLLM_MODEL",
        "<model>",
        "",
        SM,
        "Model: hub id, local dir, s3:// prefix or .tar.gz (first in source order)",
    ),
    Var(
        "SM_VLLM_<NAME>",
        "<name>",
        "",
        SM,
        "Any vLLM flag `--<name>`: true = bare flag, false = omitted, "
        "empty = bare flag, JSON array = one token each, JSON object = one token",
    ),
    Var(
        "SM_VLLM_TENSOR_PARALLEL_SIZE",
        "tensor-parallel-size",
        "all visible NeuronCores",
        SM,
        "NeuronCores the model is sharded over (Neuron: <= visible cores)",
        "tp",
    ),
    Var(
        "SM_VLLM_MAX_MODEL_LEN",
        "max-model-len",
        "config.json max_position_embeddings",
        SM,
        "Compiled sequence length (always passed on Neuron)",
        "int",
    ),
    Var(
        "SM_VLLM_MAX_NUM_SEQS",
        "max-num-seqs",
        "8 on Neuron",
        SM,
        "Compiled batch size (always passed on Neuron)",
        "int",
    ),
    Var(
        "SM_VLLM_DTYPE",
        "dtype",
        "bfloat16 on Neuron",
        SM,
        "Weights/activations dtype (`auto` is refused on Neuron)",
        "dtype",
    ),
    Var(
        "SM_VLLM_ENABLE_PREFIX_CACHING",
        "enable-prefix-caching",
        "false on Neuron",
        SM,
        "Prefix caching with a block KV layout (else `--no-enable-prefix-caching`)",
        "bool",
    ),
    Var(
        "SM_VLLM_BLOCK_SIZE",
        "block-size",
        "32 with prefix caching",
        SM,
        "KV block size (prefix caching, chunked prefill); the plugin uses max_model_len otherwise",
        "int",
    ),
    Var(
        "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE",
        "num-gpu-blocks-override",
        "ceil(max_model_len/block)*max_num_seqs",
        SM,
        "KV blocks (the plugin adds a null block); counted in max_model_len blocks without prefix caching",
        "int",
    ),
    Var(
        "SM_VLLM_ENABLE_CHUNKED_PREFILL",
        "enable-chunked-prefill",
        "false",
        SM,
        "Chunked prefill (Neuron: needs chunked_prefill_config; sets DISABLE_NEURON_CUSTOM_SCHEDULER=1)",
        "bool",
    ),
    Var(
        "SM_VLLM_ADDITIONAL_CONFIG",
        "additional-config",
        "{}",
        SM,
        "JSON object; its override_neuron_config merges with the SM_NEURON_* keys",
    ),
    Var(
        "SM_VLLM_REVISION",
        "revision",
        "",
        SM,
        "Hub revision (hub models only; refused on Neuron: download it to a directory or S3)",
    ),
    Var(
        "SM_VLLM_TRUST_REMOTE_CODE", "trust-remote-code", "false", SM, "Allow model code from the hub", "bool"
    ),
    Var(
        "SM_NEURON_OVERRIDE_CONFIG",
        "<override>",
        "{}",
        NEURON,
        "JSON object merged into override_neuron_config",
    ),
    Var(
        "SM_VLLM_OVERRIDE_NEURON_CONFIG",
        "<override>",
        "{}",
        NEURON,
        "Same as SM_NEURON_OVERRIDE_CONFIG (the in-tree flag's name)",
    ),
    Var(
        "SM_NEURON_<KEY>",
        "<override>",
        "",
        NEURON,
        "One override_neuron_config key (lowercased); true/false in any case are booleans, else JSON "
        "when it parses, else a string",
    ),
    Var("OPTION_MODEL_ID", "<model>", "", LMI, "Model (last in source order)", "model"),
    Var("OPTION_TENSOR_PARALLEL_DEGREE", "tensor-parallel-size", "", LMI, "`max` = all visible cores", "tp"),
    Var(
        "TENSOR_PARALLEL_DEGREE",
        "tensor-parallel-size",
        "",
        LMI,
        "Same as OPTION_TENSOR_PARALLEL_DEGREE",
        "tp",
    ),
    Var("OPTION_MAX_ROLLING_BATCH_SIZE", "max-num-seqs", "", LMI, "Batch size", "int"),
    Var("OPTION_N_POSITIONS", "max-model-len", "", LMI, "Sequence length", "int"),
    Var("OPTION_MAX_MODEL_LEN", "max-model-len", "", LMI, "Sequence length", "int"),
    Var("OPTION_DTYPE", "dtype", "", LMI, "fp16 / bf16 / fp32 or a vLLM dtype", "dtype"),
    Var("OPTION_TRUST_REMOTE_CODE", "trust-remote-code", "", LMI, "Allow model code from the hub", "bool"),
    Var("OPTION_REVISION", "revision", "", LMI, "Hub revision", "str"),
    Var("HF_REVISION", "revision", "", LMI, "Hub revision", "str"),
    Var("OPTION_COMPILED_GRAPH_PATH", "<artifacts>", "", LMI, "Same as NEURON_COMPILED_ARTIFACTS"),
    Var("OPTION_ROLLING_BATCH", "", "", LMI, "Accepted and ignored (always vLLM)"),
    Var("OPTION_ENTRYPOINT", "", "", LMI, "Accepted and ignored"),
    Var("OPTION_ENGINE", "", "", LMI, "Accepted and ignored"),
    Var(
        "OPTION_TGI_COMPAT",
        "",
        "false",
        LMI,
        "true: generate answers in TGI's shapes (dialect `tgi`)",
        "bool",
    ),
    Var(
        "OPTION_OUTPUT_FORMATTER",
        "",
        "jsonlines",
        LMI,
        "LMI dialect stream format: jsonlines | sse",
    ),
    Var("HF_MODEL_ID", "<model>", "", TGI, "Model: hub id, local path or s3:// prefix", "model"),
    Var("HF_MODEL_REVISION", "revision", "", TGI, "Hub revision", "str"),
    Var("HF_MODEL_TRUST_REMOTE_CODE", "trust-remote-code", "", TGI, "Allow model code from the hub", "bool"),
    Var("HF_NUM_CORES", "tensor-parallel-size", "", TGI, "NeuronCores (TGI on Neuron)", "tp"),
    Var("MAX_BATCH_SIZE", "max-num-seqs", "", TGI, "Batch size (TGI on Neuron)", "int"),
    Var("MAX_TOTAL_TOKENS", "max-model-len", "", TGI, "Sequence length (TGI on Neuron)", "int"),
    Var("HF_AUTO_CAST_TYPE", "dtype", "", TGI, "bf16 / fp16 / fp32 (TGI on Neuron)", "dtype"),
)

# Variables neuronserve itself reads by name.
HOST_VARS: tuple[Var, ...] = (
    Var(
        "NEURONSERVE_DEVICE",
        "",
        "auto",
        NS,
        "auto | neuron | cpu (`--device`); auto = neuron when /dev/neuron* exists",
    ),
    Var(
        "NEURONSERVE_INTEGRATION",
        "",
        "by installed versions",
        NS,
        "plugin (vllm-neuron 0.2.x) | in-tree (vLLM 0.9/0.10 `--device neuron`)",
    ),
    Var(
        "VLLM_NEURON_FRAMEWORK",
        "",
        "neuronx-distributed-inference",
        NS,
        "In-tree only: neuronx-distributed-inference | transformers-neuronx | optimum-neuron",
    ),
    Var("NEURONSERVE_ENGINE_PORT", "", "8081", NS, "Engine port on 127.0.0.1 (not the front port)"),
    Var("NEURONSERVE_WORK_DIR", "", "/tmp/neuronserve", NS, "Engine CWD, staged model, local artifacts"),
    Var("NEURONSERVE_CACHE_URI", "", "", NS, "s3:// prefix of the keyed compiled-artifact cache"),
    Var("NEURONSERVE_CACHE_READ_ONLY", "", "false", NS, "Never upload compiled artifacts"),
    Var("NEURONSERVE_MAX_CONCURRENCY", "", "256", NS, "Requests in flight before 429 (0 = unlimited)"),
    Var("NEURONSERVE_DRAIN_GRACE_S", "", "25", NS, "Seconds for in-flight requests on SIGTERM"),
    Var(
        "NEURONSERVE_GENERATE_DIALECT",
        "",
        "lmi with OPTION_MODEL_ID or serving.properties, else tgi",
        NS,
        "Shapes of generate answers on /invocations: tgi | lmi (OPTION_TGI_COMPAT=true: tgi)",
    ),
    Var(
        "NEURONSERVE_STRICT_MODEL_NAME",
        "",
        "false",
        NS,
        "true: an OpenAI body naming another model gets vLLM's 404 (else the one model serves it)",
    ),
    Var(
        "NEURONSERVE_INSTANCE_TYPE",
        "",
        "detected devices",
        NS,
        "Instance to check HBM fit for (`ml.inf2.xlarge` or `inf2.xlarge`); must agree with the devices",
    ),
    Var("NEURONSERVE_FIT_CHECK", "", "refuse", NS, "HBM estimate over 100 %: refuse | warn | off"),
    Var("NEURONSERVE_HBM_GIB_PER_CORE", "", "instance table", NS, "Replaces the table's HBM per core"),
    Var("NEURONSERVE_HBM_OVERHEAD_GIB", "", "1.5", NS, "Per-core overhead the HBM estimate assumes"),
    Var(
        "NEURONSERVE_REQUIRE_CACHE_HIT",
        "",
        "false",
        NS,
        "Fail at once (never compile) when the keyed compiled artifacts are not in the cache",
    ),
    Var(
        "NEURONSERVE_DATA_PARALLEL",
        "",
        "1",
        NS,
        "Engine replicas on disjoint cores: N or auto (visible cores // TP); same as "
        "SM_VLLM_DATA_PARALLEL_SIZE; never passed to vLLM",
    ),
    Var(
        "NEURONSERVE_MIN_READY_REPLICAS",
        "",
        "all at start, then 1",
        NS,
        "READY replicas /ping needs to answer 200",
    ),
    Var(
        "NEURONSERVE_EXPOSE_ENGINE_ROUTES",
        "",
        "false",
        NS,
        "Forward every engine route (admin ones too), not only the allowlist; warns at start",
    ),
    Var(
        "NEURONSERVE_ENGINE_NICE",
        "",
        "10",
        NS,
        "Engine niceness above the front's (0-19, 0 = same): keeps /ping fast on a saturated CPU",
    ),
    Var(
        "NEURONSERVE_LOG_FORMAT",
        "",
        "text",
        NS,
        "text | json (one JSON object per line, engine lines wrapped)",
    ),
    Var(
        "NEURON_COMPILED_ARTIFACTS",
        "<artifacts>",
        "<work_dir>/artifacts/<cache_key>",
        NRT,
        "Compiled artifacts: s3:// (explicit, unkeyed) or a local dir",
    ),
    Var(
        "NEURON_RT_VISIBLE_CORES",
        "",
        "all cores",
        NRT,
        "Visible NeuronCores (`0-3`, `0,1`); passed to the engine",
    ),
    Var("NEURON_RT_NUM_CORES", "", "", NRT, "NeuronCore count, when NEURON_RT_VISIBLE_CORES is not set"),
    Var("NEURON_LOGICAL_NC_CONFIG", "", "", NRT, "Physical cores per logical core (Trn2: 2)"),
    Var(
        "DISABLE_NEURON_CUSTOM_SCHEDULER",
        "",
        "1 with chunked prefill",
        NRT,
        "Set by the plan for chunked prefill; refused: 0 with chunked prefill, 1 with a contiguous KV cache",
    ),
    Var(
        "NEURON_ON_DEVICE_SAMPLING_DISABLED",
        "",
        "",
        NRT,
        "Non-zero refused (broken in 0.2.x): use SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null; 0 is accepted",
    ),
    Var(
        "NEURON_CC_FLAGS",
        "",
        "",
        NRT,
        "neuronx-cc flags for the compile; part of the compiled-artifact cache key",
    ),
    Var(
        "NEURON_CONTEXT_LENGTH_BUCKETS",
        "",
        "from context_encoding_buckets",
        NRT,
        "In-tree transformers-neuronx only: prefill buckets",
    ),
    Var(
        "NEURON_TOKEN_GEN_BUCKETS",
        "",
        "from token_generation_buckets",
        NRT,
        "In-tree transformers-neuronx only: decode buckets",
    ),
    Var(
        "SM_MODEL_DIR",
        "",
        "/opt/ml/model",
        SAGEMAKER,
        "Where SageMaker puts model data (used when non-empty)",
    ),
    Var("SAGEMAKER_BIND_TO_PORT", "", "8080", SAGEMAKER, "Front server port"),
    Var("SAGEMAKER_MAX_PAYLOAD_IN_MB", "", "6", SAGEMAKER, "Request body limit"),
    Var("SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS", "", "600", SAGEMAKER, "Engine answer deadline before 504"),
    Var("SAGEMAKER_STARTUP_TIMEOUT", "", "", SAGEMAKER, "Seconds until the engine must be ready"),
    Var(
        "SAGEMAKER_ENABLE_STATEFUL_SESSIONS",
        "",
        "false",
        SAGEMAKER,
        "Sticky sessions (X-Amzn-SageMaker-Session-Id) kept on one replica",
    ),
    Var("SAGEMAKER_SESSIONS_EXPIRATION", "", "1200", SAGEMAKER, "Session lifetime in seconds"),
)

ALL_VARS = ENGINE_VARS + HOST_VARS

LMI_VARS = {v.name: v for v in ENGINE_VARS if v.source == LMI}
TGI_VARS = {v.name: v for v in ENGINE_VARS if v.source == TGI}

# Flags whose vLLM default is "on": `false` must become `--no-<flag>` instead of being omitted.
DEFAULT_ON_FLAGS = frozenset({"enable-prefix-caching", "use-tqdm-on-load"})
