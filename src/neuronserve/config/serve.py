"""Front-server and port settings (SAGEMAKER_* / NEURONSERVE_*), validated before anything starts."""

from __future__ import annotations

from collections.abc import Mapping

from neuronserve.errors import ConfigError
from neuronserve.types import ServeOptions


def parse_num(environ: Mapping[str, str], name: str, default: float | None) -> float | None:
    """A non-negative number; a typo here would otherwise surface as a crash after staging."""
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number", (name,)) from None
    if value < 0:
        raise ConfigError(f"{name}={raw!r} must not be negative", (name,))
    return value


def parse_bool(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "false").strip().lower()
    if raw not in ("true", "false", "1", "0", ""):
        raise ConfigError(f"{name}={raw!r} is not a boolean: use true or false", (name,))
    return raw in ("true", "1")


def _nice(environ: Mapping[str, str]) -> int:
    value = parse_num(environ, "NEURONSERVE_ENGINE_NICE", 10.0)
    if value is None or value != int(value) or value > 19:
        raw = environ.get("NEURONSERVE_ENGINE_NICE")
        raise ConfigError(
            f"NEURONSERVE_ENGINE_NICE={raw!r} must be a whole number from 0 to 19",
            ("NEURONSERVE_ENGINE_NICE",),
        )
    return int(value)


def _lmi_option(environ: Mapping[str, str], props: Mapping[str, str], key: str) -> tuple[str, str] | None:
    """(origin, value) of an LMI option: serving.properties `option.<key>` wins over `OPTION_<KEY>`."""
    if props.get(f"option.{key}", "").strip():
        return f"serving.properties option.{key}", props[f"option.{key}"].strip().lower()
    name = f"OPTION_{key.upper()}"
    if environ.get(name, "").strip():
        return name, environ[name].strip().lower()
    return None


def parse_dialect(environ: Mapping[str, str], props: Mapping[str, str]) -> tuple[str, str]:
    """(dialect, LMI stream format). The LMI way of configuring a model (OPTION_MODEL_ID or a
    serving.properties) means LMI clients, so LMI's shapes; OPTION_TGI_COMPAT=true means TGI's, as
    it does in LMI; NEURONSERVE_GENERATE_DIALECT decides over both."""
    fmt_src = _lmi_option(environ, props, "output_formatter")
    fmt = fmt_src[1] if fmt_src else "jsonlines"
    if fmt not in ("jsonlines", "sse"):
        raise ConfigError(
            f"{fmt_src[0] if fmt_src else ''}={fmt!r} is not one of: jsonlines, sse",
            (fmt_src[0],) if fmt_src else (),
        )
    raw = environ.get("NEURONSERVE_GENERATE_DIALECT", "").strip().lower()
    if raw:
        if raw not in ("tgi", "lmi"):
            raise ConfigError(
                f"NEURONSERVE_GENERATE_DIALECT={raw!r} is not one of: tgi, lmi",
                ("NEURONSERVE_GENERATE_DIALECT",),
            )
        return raw, fmt
    compat = _lmi_option(environ, props, "tgi_compat")
    if compat:
        if compat[1] not in ("true", "false"):
            raise ConfigError(f"{compat[0]}={compat[1]!r} is not a boolean: use true or false", (compat[0],))
        if compat[1] == "true":
            return "tgi", fmt
    lmi = bool(environ.get("OPTION_MODEL_ID", "").strip()) or bool(props)
    return ("lmi" if lmi else "tgi"), fmt


def parse_serve(
    environ: Mapping[str, str], serving_properties: Mapping[str, str] | None = None
) -> tuple[ServeOptions, int]:
    """ServeOptions and the engine port; the two ports must differ (both bind on this host)."""
    port = int(parse_num(environ, "SAGEMAKER_BIND_TO_PORT", 8080) or 0)
    engine_port = int(parse_num(environ, "NEURONSERVE_ENGINE_PORT", 8081) or 0)
    if engine_port == port:
        raise ConfigError(
            f"NEURONSERVE_ENGINE_PORT={engine_port} equals the front port SAGEMAKER_BIND_TO_PORT={port}: "
            f"set NEURONSERVE_ENGINE_PORT={port + 1}",
            ("NEURONSERVE_ENGINE_PORT", "SAGEMAKER_BIND_TO_PORT"),
        )
    dialect, fmt = parse_dialect(environ, serving_properties or {})
    serve = ServeOptions(
        port=port,
        max_payload_mb=float(parse_num(environ, "SAGEMAKER_MAX_PAYLOAD_IN_MB", 6.0) or 6.0),
        max_concurrency=int(parse_num(environ, "NEURONSERVE_MAX_CONCURRENCY", 256) or 0),
        request_timeout_s=float(parse_num(environ, "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS", 600.0) or 600.0),
        drain_grace_s=float(parse_num(environ, "NEURONSERVE_DRAIN_GRACE_S", 25.0) or 0.0),
        startup_timeout_s=parse_num(environ, "SAGEMAKER_STARTUP_TIMEOUT", None),
        expose_engine_routes=parse_bool(environ, "NEURONSERVE_EXPOSE_ENGINE_ROUTES"),
        engine_nice=_nice(environ),
        dialect=dialect,
        lmi_stream_format=fmt,
        strict_model_name=parse_bool(environ, "NEURONSERVE_STRICT_MODEL_NAME"),
        min_ready_replicas=_positive_int(environ, "NEURONSERVE_MIN_READY_REPLICAS"),
        sticky_sessions=parse_bool(environ, "SAGEMAKER_ENABLE_STATEFUL_SESSIONS"),
        session_ttl_s=_session_ttl(environ),
    )
    return serve, engine_port


def _positive_int(environ: Mapping[str, str], name: str) -> int | None:
    """isdecimal, not isdigit: isdigit accepts "²", which int() refuses (a traceback before)."""
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdecimal() or int(raw) < 1:
        raise ConfigError(f"{name}={raw!r} must be a whole number >= 1", (name,))
    return int(raw)


def _session_ttl(environ: Mapping[str, str]) -> float:
    ttl = parse_num(environ, "SAGEMAKER_SESSIONS_EXPIRATION", 1200.0) or 0.0
    if ttl <= 0:
        raise ConfigError(
            "SAGEMAKER_SESSIONS_EXPIRATION must be a positive number of seconds (default 1200)",
            ("SAGEMAKER_SESSIONS_EXPIRATION",),
        )
    return ttl
