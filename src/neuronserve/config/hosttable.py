"""Rows of the settings table for the variables neuronserve itself reads by name (`NEURONSERVE_*`).

The limits that bound what one client, one archive or one failing replica may cost (connections,
headers, bodies, sequences, sessions, archive members, restarts) are rows of limitstable.py, gathered
here so the table has one list of the variables read by name.

table.py holds the engine settings (variables mapped onto vLLM flags) and gathers every row; these are
read whole, each into the ServeOptions / FitOptions / Settings attribute its `field` names, or by the
module that needs it (staging, the test-model cache), which the row's help says.
"""

from __future__ import annotations

from neuronserve.config import values as p
from neuronserve.config.limitstable import LIMIT_VARS
from neuronserve.config.var import DEVICES, DIALECTS, FIT_MODES, NS, Var
from neuronserve.lane_ids import LANE_IDS

_OWN_VARS: tuple[Var, ...] = (
    Var(
        "NEURONSERVE_DEVICE",
        "",
        "auto",
        NS,
        "auto | neuron | cpu (`--device`); auto = neuron when /dev/neuron* exists",
        p.choice(*DEVICES),
        "settings.device",
    ),
    Var(
        "NEURONSERVE_INTEGRATION",
        "",
        None,
        NS,
        "plugin (vllm-neuron 0.2.x) | in-tree (vLLM 0.9/0.10 `--device neuron`)",
        p.choice("plugin", "in-tree"),
        "settings.integration",
        "by installed versions",
    ),
    Var(
        "NEURONSERVE_STACK",
        "",
        None,
        NS,
        f"Stack lane the plan is for: {' | '.join(LANE_IDS)} (docs/LANES.md); must agree with the installed "
        "vllm-neuron",
        p.choice(*LANE_IDS),
        "settings.stack",
        "the installed vllm-neuron's lane, else 2.27",
    ),
    Var(
        "VLLM_NEURON_FRAMEWORK",
        "",
        None,
        NS,
        "In-tree only: neuronx-distributed-inference | transformers-neuronx | optimum-neuron",
        p.choice("neuronx-distributed-inference", "transformers-neuronx", "optimum-neuron"),
        "settings.framework",
        "neuronx-distributed-inference",
    ),
    Var(
        "NEURONSERVE_ENGINE_PORT",
        "",
        8081,
        NS,
        "Engine port on 127.0.0.1 (not the front port), 1-65535",
        p.port,
        "settings.engine_port",
    ),
    Var(
        "NEURONSERVE_HOST",
        "",
        "0.0.0.0",
        NS,
        "Address the front server listens on: 0.0.0.0 every interface (containers), 127.0.0.1 this host "
        "only (scripts/serve-local), or another IP address",
        p.listen_address,
        "serve.host",
    ),
    Var(
        "NEURONSERVE_WORK_DIR",
        "",
        "/tmp/neuronserve",
        NS,
        "Engine CWD, staged model, local artifacts",
        field="settings.work_dir",
    ),
    Var(
        "NEURONSERVE_CACHE_URI",
        "",
        None,
        NS,
        "s3:// prefix of the keyed compiled-artifact cache",
        field="settings.cache_uri",
    ),
    Var(
        "NEURONSERVE_CACHE_READ_ONLY",
        "",
        False,
        NS,
        "Never upload compiled artifacts",
        p.boolean,
        "settings.cache_read_only",
    ),
    Var(
        "NEURONSERVE_DRAIN_GRACE_S",
        "",
        25.0,
        NS,
        "Seconds for in-flight requests on SIGTERM",
        p.number,
        "serve.drain_grace_s",
    ),
    Var(
        "NEURONSERVE_GENERATE_DIALECT",
        "",
        "tgi",
        NS,
        "Shapes of generate answers on /invocations: tgi | lmi (OPTION_TGI_COMPAT=true: tgi)",
        p.choice(*DIALECTS),
        "serve.dialect",
        "lmi with OPTION_MODEL_ID or serving.properties, else tgi",
    ),
    Var(
        "NEURONSERVE_STRICT_MODEL_NAME",
        "",
        False,
        NS,
        "true: an OpenAI body naming another model gets vLLM's 404 (else the one model serves it)",
        p.boolean,
        "serve.strict_model_name",
    ),
    Var(
        "NEURONSERVE_INSTANCE_TYPE",
        "",
        None,
        NS,
        "Instance to plan for (`ml.inf2.xlarge` or `inf2.xlarge`): a Neuron plan (unless device cpu) whose "
        "TP x DP and HBM fit are checked against it; must agree with the devices",
        field="fit.instance_type",
        default_doc="detected devices",
    ),
    Var(
        "NEURONSERVE_FIT_CHECK",
        "",
        "refuse",
        NS,
        "HBM estimate over 100 %: refuse | warn | off",
        p.choice(*FIT_MODES),
        "fit.mode",
    ),
    Var(
        "NEURONSERVE_HBM_GIB_PER_CORE",
        "",
        None,
        NS,
        "Replaces the table's HBM per core",
        p.gib_above_zero,
        "fit.hbm_gib_per_core",
        "instance table",
    ),
    Var(
        "NEURONSERVE_HBM_OVERHEAD_GIB",
        "",
        None,
        NS,
        "Per-core overhead the HBM estimate assumes",
        p.number,
        "fit.overhead_gib",
        "1.5",
    ),
    Var(
        "NEURONSERVE_REQUIRE_CACHE_HIT",
        "",
        False,
        NS,
        "Fail at once (never compile) when the keyed compiled artifacts are not in the cache",
        p.boolean,
        "fit.require_cache_hit",
    ),
    Var(
        "NEURONSERVE_COMPILE_RETRIES",
        "",
        1,
        NS,
        "Times `neuronserve compile` starts the engine again after a failed compile before it gives up, "
        "0-10 (0 = no retry)",
        p.whole_between(0, 10),
    ),
    Var(
        "NEURONSERVE_LIVE_LOOP_STALL_S",
        "",
        10.0,
        NS,
        "Seconds the front's event loop may run late before /live answers 503 (0 = never); seen by a "
        "watchdog thread (read by the front server at start)",
        p.number,
    ),
    Var(
        "NEURONSERVE_LIVE_STAGE_STALL_S",
        "",
        600.0,
        NS,
        "Seconds staging may go without a byte or a file advancing before /live answers 503 (0 = never); "
        "a slow download that moves never trips it, and a compile is never stalled (read by the front "
        "server at start)",
        p.number,
    ),
    Var(
        "NEURONSERVE_DATA_PARALLEL",
        "data-parallel-size",
        None,
        NS,
        "Engine replicas on disjoint cores: N or auto (visible cores // TP); same as "
        "SM_VLLM_DATA_PARALLEL_SIZE; never passed to vLLM",
        default_doc="1",
    ),
    Var(
        "NEURONSERVE_FRONT_WORKERS",
        "",
        None,
        NS,
        "Front processes sharing the port (SO_REUSEPORT), each with every route: N, or auto (enough that "
        "the front is not the bottleneck of the plan's replicas, at most the CPUs the container may use; "
        "the numbers are logged at start, docs/PERFORMANCE.md). Limits, sessions, /ping and /metrics stay "
        "container-wide; 1 serves in the supervisor's own process",
        p.count_or_auto,
        "serve.front_workers",
        default_doc="auto",
    ),
    Var(
        "NEURONSERVE_FRONT_WORKER_TIMEOUT_S",
        "",
        30.0,
        NS,
        "Seconds a front worker's event loop may go without its heartbeat (stopped, blocked, spinning) "
        "before the supervisor kills and replaces it, logged with its pid and counted in "
        "neuronserve_front_worker_restarts_total; only with 2 or more front workers (read by the "
        "server at start)",
        p.seconds_above_zero,
    ),
    Var(
        "NEURONSERVE_MIN_READY_REPLICAS",
        "",
        None,
        NS,
        "READY replicas /ping needs to answer 200",
        p.at_least_one,
        "serve.min_ready_replicas",
        "all at start, then 1",
    ),
    Var(
        "NEURONSERVE_EXPOSE_ENGINE_ROUTES",
        "",
        False,
        NS,
        "Forward every engine route (admin ones too), not only the allowlist; warns at start",
        p.boolean,
        "serve.expose_engine_routes",
    ),
    Var(
        "NEURONSERVE_ENGINE_NICE",
        "",
        10,
        NS,
        "Engine niceness above the front's (0-19, 0 = same): keeps /ping fast on a saturated CPU",
        p.niceness,
        "serve.engine_nice",
    ),
    Var(
        "HF_TOKEN_SECRET_ARN",
        "",
        None,
        NS,
        'Secrets Manager ARN whose secret (the token, or JSON {"HF_TOKEN": ...}) `serve` reads into '
        "HF_TOKEN at start (host/secrets.py); the role needs secretsmanager:GetSecretValue on it",
    ),
    Var(
        "NEURONSERVE_LOG_FORMAT",
        "",
        "text",
        NS,
        "text | json (one JSON object per line, engine lines wrapped)",
        p.choice("text", "json"),
    ),
    Var(
        "NEURONSERVE_S3_ENGINE",
        "",
        "auto",
        NS,
        "S3 download engine: auto (s5cmd when installed) | s5cmd (required) | python (ranged GETs)",
        p.choice("auto", "s5cmd", "python"),
    ),
    Var(
        "NEURONSERVE_S3_CONCURRENCY",
        "",
        None,
        NS,
        "Parallel S3 requests, 1-128 (s5cmd `--numworkers`, the Python engine, uploads)",
        p.whole_between(1, 128),
        default_doc="s5cmd: its own; Python engine: 16",
    ),
    Var(
        "NEURONSERVE_S3_PART_MB",
        "",
        16,
        NS,
        "Part size in MiB, 1-5120 (S3's largest part is 5 GiB), of the Python engine's ranged GETs and of "
        "uploads",
        p.whole_between(1, 5120),
    ),
    Var(
        "NEURONSERVE_CACHE_HOME",
        "",
        None,
        NS,
        "Where `python -m neuronserve.models_local` and scripts/bootstrap keep test models and the venv",
        default_doc="$XDG_CACHE_HOME/neuronserve, else ~/.cache/neuronserve",
    ),
)

NEURONSERVE_VARS: tuple[Var, ...] = _OWN_VARS + LIMIT_VARS
