"""Front-server and port settings (SAGEMAKER_* / NEURONSERVE_*), validated before anything starts.

Each ServeOptions attribute is read through the settings-table row whose `field` names it (its
parser, default and messages live there); this module keeps only what spans several rows: the two
ports must differ, and the generate dialect is decided from the LMI configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from neuronserve.config.compat import property_origin
from neuronserve.config.table import FIELDS, defaults, read_group
from neuronserve.config.values import one_of
from neuronserve.config.var import DIALECTS, STREAM_FORMATS, Var
from neuronserve.errors import ConfigError

_SERVE = defaults("serve")  # each attribute's default is its settings-table row's (config/hosttable.py)


@dataclass(frozen=True)
class ServeOptions:
    """What the front server needs; resolved from SAGEMAKER_* / NEURONSERVE_* settings."""

    host: str = _SERVE["host"]
    port: int = _SERVE["port"]
    max_payload_mb: float = _SERVE["max_payload_mb"]
    max_concurrency: int = _SERVE["max_concurrency"]  # requests in flight before 429; 0 = unlimited
    request_timeout_s: float = _SERVE["request_timeout_s"]  # engine answer deadline before 504
    drain_grace_s: float = _SERVE["drain_grace_s"]  # SIGTERM: time for in-flight requests (SageMaker: 30 s)
    startup_timeout_s: float | None = _SERVE["startup_timeout_s"]  # READY by then, else FAILED; None = wait
    engine_nice: int = _SERVE["engine_nice"]  # niceness above the front's: /ping stays fast on a busy host
    expose_engine_routes: bool = _SERVE["expose_engine_routes"]  # every engine route, not the allowlist
    dialect: str = _SERVE["dialect"]  # generate answers on /invocations: "tgi" or "lmi" (LMI's shapes)
    lmi_stream_format: str = _SERVE["lmi_stream_format"]  # LMI dialect streams: "jsonlines" or "sse"
    strict_model_name: bool = _SERVE["strict_model_name"]  # vLLM's 404 for bodies naming another model
    # Data parallel: READY replicas /ping needs (None = all at start, then one); sticky sessions.
    min_ready_replicas: int | None = _SERVE["min_ready_replicas"]
    sticky_sessions: bool = _SERVE["sticky_sessions"]
    # Front processes on the port (None = auto: one per replica, at most the usable CPUs); serve/workers.py.
    front_workers: int | None = _SERVE["front_workers"]
    session_ttl_s: float = _SERVE["session_ttl_s"]
    # Hostile clients: sequences per request (counted against max_concurrency too), the engine pool
    # (None = derived from max_concurrency), the engine scrape cache, the session cap, embeds inputs.
    max_sequences_per_request: int = _SERVE["max_sequences_per_request"]
    engine_connections: int | None = _SERVE["engine_connections"]
    metrics_cache_s: float = _SERVE["metrics_cache_s"]
    max_sessions: int = _SERVE["max_sessions"]
    allow_prompt_embeds: bool = _SERVE["allow_prompt_embeds"]
    # A replica restarted more than max_restarts times within restart_window_s ends the server.
    max_restarts: int = _SERVE["max_restarts"]
    restart_window_s: float = _SERVE["restart_window_s"]


# ServeOptions attributes read through their rows, in the order their checks run (after the ports and
# the dialect): with two mistakes, the same one is reported first as always.
_READ_ORDER = (
    "host",
    "max_payload_mb",
    "max_concurrency",
    "request_timeout_s",
    "drain_grace_s",
    "startup_timeout_s",
    "expose_engine_routes",
    "engine_nice",
    "strict_model_name",
    "min_ready_replicas",
    "sticky_sessions",
    "front_workers",
    "session_ttl_s",
    "max_sequences_per_request",
    "engine_connections",
    "metrics_cache_s",
    "max_sessions",
    "allow_prompt_embeds",
    "max_restarts",
    "restart_window_s",
)


def _lmi_option(
    environ: Mapping[str, str], props: Mapping[str, str], row: Var, files: Mapping[str, str] | None = None
) -> tuple[str, str] | None:
    """(origin, value) of an LMI option: serving.properties `option.<key>` wins over `OPTION_<KEY>`."""
    key = "option." + row.name.removeprefix("OPTION_").lower()
    if props.get(key, "").strip():
        return property_origin(key, files), props[key].strip().lower()
    if environ.get(row.name, "").strip():
        return row.name, environ[row.name].strip().lower()
    return None


def parse_dialect(
    environ: Mapping[str, str], props: Mapping[str, str], files: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """(dialect, LMI stream format). The LMI way of configuring a model (OPTION_MODEL_ID or a
    serving.properties) means LMI clients, so LMI's shapes; OPTION_TGI_COMPAT=true means TGI's, as
    it does in LMI; NEURONSERVE_GENERATE_DIALECT decides over both."""
    dialect_row, fmt_row = FIELDS["serve.dialect"], FIELDS["serve.lmi_stream_format"]
    fmt_src = _lmi_option(environ, props, fmt_row, files)
    fmt = one_of(*fmt_src, STREAM_FORMATS) if fmt_src else fmt_row.default
    raw = environ.get(dialect_row.name, "").strip().lower()
    if raw:
        return one_of(dialect_row.name, raw, DIALECTS), fmt
    compat = _lmi_option(environ, props, FIELDS["dialect.tgi_compat"], files)
    if compat:
        if compat[1] not in ("true", "false"):
            raise ConfigError(f"{compat[0]}={compat[1]!r} is not a boolean: use true or false", (compat[0],))
        if compat[1] == "true":
            return "tgi", fmt
    lmi = bool(environ.get(FIELDS["dialect.lmi_model"].name, "").strip()) or bool(props)
    return ("lmi" if lmi else "tgi"), fmt


def parse_serve(
    environ: Mapping[str, str],
    serving_properties: Mapping[str, str] | None = None,
    property_files: Mapping[str, str] | None = None,
) -> tuple[ServeOptions, int]:
    """ServeOptions and the engine port; the two ports must differ (both bind on this host)."""
    front, back = FIELDS["serve.port"], FIELDS["settings.engine_port"]
    port, engine_port = front.read(environ), back.read(environ)
    if engine_port == port:
        raise ConfigError(
            f"{back.name}={engine_port} equals the front port {front.name}={port}: "
            f"set {back.name}={port + 1}",
            (back.name, front.name),
        )
    dialect, fmt = parse_dialect(environ, serving_properties or {}, property_files)
    values = read_group(environ, "serve", _READ_ORDER)
    return ServeOptions(port=port, dialect=dialect, lmi_stream_format=fmt, **values), engine_port
