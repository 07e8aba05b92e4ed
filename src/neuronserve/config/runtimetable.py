"""Rows of the settings table for the Neuron runtime's and SageMaker's own variables.

neuronserve reads them because it plans for them: the runtime's core and compiler settings pass to the
engine (`field` "engine_env": as given) or shape the plan; SageMaker's set the front server's limits.
"""

from __future__ import annotations

from neuronserve.config import values as p
from neuronserve.config.var import NRT, SAGEMAKER, Var

RUNTIME_VARS: tuple[Var, ...] = (
    Var(
        "NEURON_COMPILED_ARTIFACTS",
        "<artifacts>",
        None,
        NRT,
        "Compiled artifacts: s3:// (explicit, unkeyed) or a local dir",
        default_doc="<work_dir>/artifacts/<cache_key>",
    ),
    Var(
        "NEURON_RT_VISIBLE_CORES",
        "",
        None,
        NRT,
        "Visible NeuronCores (`0-3`, `0,1`); passed to the engine",
        field="settings.visible_cores",
        default_doc="all cores",
    ),
    Var("NEURON_RT_NUM_CORES", "", None, NRT, "NeuronCore count, when NEURON_RT_VISIBLE_CORES is not set"),
    Var(
        "NEURON_LOGICAL_NC_CONFIG",
        "",
        None,
        NRT,
        "Physical cores per logical core (Trn2: 2)",
        field="settings.logical_nc_config",
    ),
    Var(
        "DISABLE_NEURON_CUSTOM_SCHEDULER",
        "",
        None,
        NRT,
        "Set by the plan for chunked prefill; refused: 0 with chunked prefill, 1 with a contiguous KV cache",
        field="engine_env",
        default_doc="1 with chunked prefill",
    ),
    Var(
        "NEURON_ON_DEVICE_SAMPLING_DISABLED",
        "",
        None,
        NRT,
        "Non-zero refused (broken in 0.2.x): use SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null; 0 is accepted",
        field="engine_env",
    ),
    Var(
        "NEURON_CC_FLAGS",
        "",
        None,
        NRT,
        "neuronx-cc flags for the compile; part of the compiled-artifact cache key",
        field="engine_env",
    ),
    Var(
        "NEURON_CONTEXT_LENGTH_BUCKETS",
        "",
        None,
        NRT,
        "In-tree transformers-neuronx only: prefill buckets",
        field="engine_env",
        default_doc="from context_encoding_buckets",
    ),
    Var(
        "NEURON_TOKEN_GEN_BUCKETS",
        "",
        None,
        NRT,
        "In-tree transformers-neuronx only: decode buckets",
        field="engine_env",
        default_doc="from token_generation_buckets",
    ),
    Var(
        "NEURON_SDK_VERSION",
        "",
        None,
        NRT,
        "The `sdk` label of the neuronserve_build_info metric",
        default_doc="neuronx-cc and its version (none without it)",
    ),
    Var(
        "SM_MODEL_DIR",
        "",
        "/opt/ml/model",
        SAGEMAKER,
        "Where SageMaker puts model data (used when non-empty)",
    ),
    Var("SAGEMAKER_BIND_TO_PORT", "", 8080, SAGEMAKER, "Front server port", p.whole_number, "serve.port"),
    Var(
        "SAGEMAKER_MAX_PAYLOAD_IN_MB",
        "",
        6.0,
        SAGEMAKER,
        "Request body limit",
        p.number_or_default,
        "serve.max_payload_mb",
    ),
    Var(
        "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS",
        "",
        600.0,
        SAGEMAKER,
        "Engine answer deadline before 504",
        p.number_or_default,
        "serve.request_timeout_s",
    ),
    Var(
        "SAGEMAKER_STARTUP_TIMEOUT",
        "",
        None,
        SAGEMAKER,
        "Seconds until the engine must be ready",
        p.number,
        "serve.startup_timeout_s",
    ),
    Var(
        "SAGEMAKER_ENABLE_STATEFUL_SESSIONS",
        "",
        False,
        SAGEMAKER,
        "Sticky sessions (X-Amzn-SageMaker-Session-Id) kept on one replica",
        p.boolean,
        "serve.sticky_sessions",
    ),
    Var(
        "SAGEMAKER_SESSIONS_EXPIRATION",
        "",
        1200.0,
        SAGEMAKER,
        "Session lifetime in seconds",
        p.seconds_above_zero,
        "serve.session_ttl_s",
    ),
)
