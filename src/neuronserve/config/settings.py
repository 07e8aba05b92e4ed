"""Settings: the user's configuration, read once from an environment mapping (never at import time).

Every source (SM_VLLM_*, SM_NEURON_*, LMI OPTION_* and serving.properties, TGI/HF names, engine
arguments after `--`) is mapped onto the same engine setting names, each value remembering the
variable it came from. Two sources that disagree are an error naming both: silently picking one is
how a container compiles for 15 minutes with a batch size nobody asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from neuronserve.config.compat import compat_sources
from neuronserve.config.fit import FitOptions, parse_fit
from neuronserve.config.origin import Collector, Setting
from neuronserve.config.serve import ServeOptions, parse_serve
from neuronserve.config.stage import StageOptions, parse_stage
from neuronserve.config.table import (
    DEFAULT_ON_FLAGS,
    ENGINE_ENV,
    ENGINE_VARS,
    FIELDS,
    HOST_ENGINE_VARS,
    HOST_VARS,
    TGI_VARS,
    VARS,
    read_group,
)
from neuronserve.config.typos import check_names
from neuronserve.config.values import EngineValue, json_or_none, object_named, one_of, sm_vllm_value
from neuronserve.config.var import DEVICES, OVERRIDE_PATTERN, SM, SM_PATTERN
from neuronserve.errors import ConfigError

__all__ = [
    "EXTRA_BOOL",
    "EXTRA_VALUE",
    "EngineValue",
    "Setting",
    "Settings",
    "env_name",
    "flag_tokens",
    "parse_settings",
    "sm_vllm_value",
]

# Engine flags read from the arguments after `--` (so rules and conflicts see them too); a value flag
# takes the next token unless given as `--flag=value`.
EXTRA_BOOL = frozenset(
    {"enable-prefix-caching", "enable-chunked-prefill", "enable-lora", "trust-remote-code"}
)
EXTRA_VALUE = frozenset(
    {
        "model",
        "tensor-parallel-size",
        "max-model-len",
        "max-num-seqs",
        "dtype",
        "block-size",
        "num-gpu-blocks-override",
        "max-num-batched-tokens",
        "revision",
        "task",
        "runner",
        "speculative-config",
        "data-parallel-size",
    }
)
SM_PREFIX = "SM_VLLM_"
OVERRIDE_PREFIX = "SM_NEURON_"
# Variables read by their whole name, not as one flag each: in any case after the prefix (see _fold).
_MODEL_VAR = next(v.name for v in ENGINE_VARS if v.source == SM and v.key == "<model>")
_ADDITIONAL_VAR = next(v.name for v in ENGINE_VARS if v.key == "additional-config")
_OVERRIDE_OBJECTS = tuple(v.name for v in ENGINE_VARS if v.key == "<override>" and "<" not in v.name)
_READ_APART = (_MODEL_VAR, _ADDITIONAL_VAR, *_OVERRIDE_OBJECTS)
_ARTIFACT_VARS = tuple(v for v in HOST_VARS if v.key == "<artifacts>")
_TGI_MODEL_VARS = tuple(v for v in TGI_VARS.values() if v.key == "<model>")
# Settings attributes that are their row's typed value as is (device, integration and framework also
# keep the variable they came from; the engine port is read with the front port in parse_serve).
_PLAIN = ("cache_read_only", "cache_uri", "work_dir", "visible_cores", "logical_nc_config", "stack")


@dataclass(frozen=True)
class Settings:
    """Everything the user configured, normalised; the plan adds host facts and defaults."""

    engine: dict[str, Setting]  # vLLM flag name (no `--`) -> EngineValue
    override: dict[str, Setting]  # override_neuron_config key -> JSON value
    additional_config: dict[str, Any]  # SM_VLLM_ADDITIONAL_CONFIG without override_neuron_config
    models: tuple[Setting, ...]  # model candidates in source order (the SageMaker dir is a host fact)
    extra_args: tuple[str, ...]
    device: Setting
    integration: Setting | None
    framework: Setting | None
    artifacts: Setting | None  # NEURON_COMPILED_ARTIFACTS / OPTION_COMPILED_GRAPH_PATH
    cache_uri: str | None
    cache_read_only: bool
    engine_port: int
    work_dir: str
    serve: ServeOptions
    visible_cores: str | None
    logical_nc_config: str | None
    passthrough_env: dict[str, str]  # Neuron env the user set that the engine must see as is
    warnings: tuple[str, ...] = field(default=())
    fit: FitOptions = field(default_factory=FitOptions)  # instance facts, HBM check, cache-hit-only
    stack: str | None = None  # NEURONSERVE_STACK: the lane (plan/lanes/registry.py); None = from the plugin
    stage: StageOptions = field(default_factory=StageOptions)  # S3 engine and parts, archive limits, hub

    def get(self, key: str) -> Any:
        s = self.engine.get(key)
        return None if s is None else s.value

    def origin(self, key: str, fallback: str) -> str:
        s = self.engine.get(key)
        return fallback if s is None else s.origin

    def named(self, key: str) -> str:
        """The name advice about an engine setting uses: where the user set it (serving.properties
        `option.tensor_parallel_degree`, OPTION_*, HF_*, `-- --flag`, SM_VLLM_*), else its SM_VLLM_*
        variable. Advice to set SM_VLLM_TENSOR_PARALLEL_SIZE while serving.properties sets the same
        setting would be refused as a conflict when followed."""
        return self.origin(key, env_name(key))


def env_name(key: str) -> str:
    """The SM_VLLM_* variable a user sets for an engine flag (named in messages)."""
    return SM_PREFIX + key.upper().replace("-", "_")


def flag_tokens(key: str, value: EngineValue) -> list[str]:
    """Engine argv tokens for one setting."""
    flag = "--" + key
    if value is True:
        return [flag]
    if value is False:
        return ["--no-" + key] if key in DEFAULT_ON_FLAGS else []
    if isinstance(value, list):
        return [flag, *value] if value else []
    return [flag, value]


def parse_extra_args(extra: Sequence[str], engine: Collector, models: list[Setting]) -> None:
    """Read the flags the plan reasons about from the verbatim engine arguments.

    A boolean flag with an inline value is refused: vLLM's BooleanOptionalAction refuses
    `--enable-prefix-caching=false` itself, and reading it as the bare flag planned the opposite."""
    i = 0
    while i < len(extra):
        tok = extra[i]
        i += 1
        if not tok.startswith("--"):
            continue
        name, eq, inline = tok[2:].partition("=")
        base = name.removeprefix("no-")
        if eq and base in EXTRA_BOOL:
            raise ConfigError(
                f"engine argument {tok} after `--`: --{base} takes no value (vLLM refuses one): "
                f"use --{base} or --no-{base}",
                (f"--{name}",),
            )
        if name.startswith("no-") and name[3:] in EXTRA_BOOL:
            engine.add(name[3:], False, f"-- --{name}")
        elif name in EXTRA_BOOL:
            engine.add(name, True, f"-- --{name}")
        elif name in EXTRA_VALUE:
            if eq:
                value = inline
            elif i < len(extra):
                value, i = extra[i], i + 1
            else:
                raise ConfigError(f"engine argument --{name} after `--` needs a value", (f"--{name}",))
            if name == "model":
                models.append(Setting(value, "-- --model"))
            else:
                engine.add(name, value, f"-- --{name}")


def _fold(key: str) -> str:
    """SM_VLLM_* and SM_NEURON_* names in upper case after the prefix: the AWS vLLM DLC lowercases
    SM_VLLM_* names, and SM_VLLM_Max_Model_Len always worked here, but SM_VLLM_Model and
    SM_VLLM_Additional_Config became flags (`--model` a second time, a string `--additional-config`)
    and SM_NEURON_Override_Config an override key "override_config"."""
    return key.upper() if key.startswith((SM_PREFIX, OVERRIDE_PREFIX)) else key


def _spelling(environ: Mapping[str, str], name: str) -> str | None:
    """The variable that sets `name` (in any case, see _fold); two spellings must say the same."""
    found = [k for k in sorted(environ) if _fold(k) == name and environ[k].strip()]
    first = environ[found[0]].strip() if found else ""
    for other in found[1:]:
        value = environ[other].strip()
        parsed = json_or_none(value)
        if value != first and (parsed is None or parsed != json_or_none(first)):  # equal text or JSON
            raise ConfigError(
                f"{found[0]} and {other} are one variable with different values: remove one of them",
                (found[0], other),
            )
    return found[0] if found else None


def _neuron_override(
    environ: Mapping[str, str], additional: dict[str, Any], additional_var: str
) -> dict[str, Setting]:
    out = Collector()
    key_row = VARS[OVERRIDE_PATTERN]
    for key in sorted(environ):
        if key.startswith(OVERRIDE_PREFIX) and _fold(key) not in _OVERRIDE_OBJECTS:
            out.add(key[len(OVERRIDE_PREFIX) :].lower(), key_row.parse(key_row, environ[key]), key)
    objects: list[tuple[str, Any]] = []
    for var in _OVERRIDE_OBJECTS:
        name = _spelling(environ, var) or var
        objects.append((name, _json_object(environ, name)))
    objects.append((additional_var, additional.pop("override_neuron_config", None) or {}))
    for name, obj in objects:
        if not isinstance(obj, dict):
            raise ConfigError(f"{name}: override_neuron_config must be a JSON object", (name,))
        for k, v in obj.items():
            out.add(k, v, name)
    return out.values


def _json_object(environ: Mapping[str, str], name: str) -> dict[str, Any]:
    raw = environ.get(name, "").strip()
    return object_named(name, raw) if raw else {}


def _engine_sources(
    environ: Mapping[str, str], extra_args: Sequence[str], engine: Collector, models: list[Setting]
) -> tuple[dict[str, Any], str]:
    """Engine settings from the arguments after `--`, then SM_VLLM_* (through the SM_VLLM_<NAME> row),
    then the host variables that feed an engine setting."""
    parse_extra_args(extra_args, engine, models)
    model_var = _spelling(environ, _MODEL_VAR)
    if model_var:
        models.append(Setting(environ[model_var].strip(), model_var))
    additional_var = _spelling(environ, _ADDITIONAL_VAR) or _ADDITIONAL_VAR
    additional = _json_object(environ, additional_var)
    flag = VARS[SM_PATTERN]  # every SM_VLLM_* flag takes the DLC's value mapping (its named row's parser)
    for key in sorted(environ):
        if key.startswith(SM_PREFIX) and _fold(key) not in _READ_APART:
            row = VARS.get(_fold(key), flag)
            engine.add(key[len(SM_PREFIX) :].lower().replace("_", "-"), row.parse(row, environ[key]), key)
    for row in HOST_ENGINE_VARS:
        if environ.get(row.name, "").strip():
            engine.add(row.key, environ[row.name].strip(), row.name)
    return additional, additional_var


def _device(environ: Mapping[str, str], flag: str | None) -> Setting:
    """`--device` (checked as given) over NEURONSERVE_DEVICE (any case); the origin names which."""
    row = FIELDS["settings.device"]
    if flag:
        return Setting(one_of("--device", flag, DEVICES), "--device")
    return Setting(row.read(environ), row.name)


def _named(environ: Mapping[str, str], attr: str) -> Setting | None:
    """A host setting with the variable that gave it, or None when unset."""
    row = FIELDS[f"settings.{attr}"]
    value = row.read(environ)
    return None if value is None else Setting(value, row.name)


def parse_settings(
    environ: Mapping[str, str],
    *,
    device: str | None = None,
    extra_args: Sequence[str] = (),
    serving_properties: Mapping[str, str] | None = None,
    property_files: Mapping[str, str] | None = None,
) -> Settings:
    """Map every configuration source onto one Settings (pure: the caller read the env and the files;
    `property_files` names the file a serving.properties key came from when it is not SM_MODEL_DIR's)."""
    # a near miss of a mapped name is refused before its value is silently lost; a retired one is warned
    warnings: list[str] = check_names(environ)
    engine = Collector()
    models: list[Setting] = []
    additional, additional_var = _engine_sources(environ, extra_args, engine, models)
    override = _neuron_override(environ, additional, additional_var)
    artifacts = Collector()
    for row in _ARTIFACT_VARS:
        if environ.get(row.name, "").strip():
            artifacts.add("artifacts", environ[row.name].strip(), row.name)
    for row in _TGI_MODEL_VARS:
        if environ.get(row.name, "").strip():
            models.append(Setting(environ[row.name].strip(), row.name))
    for key, value, origin in compat_sources(environ, serving_properties or {}, warnings, property_files):
        if key == "<model>":
            models.append(Setting(value, origin))
        else:
            (artifacts if key == "artifacts" else engine).add(key, value, origin)
    dev = _device(environ, device)
    serve, engine_port = parse_serve(environ, serving_properties, property_files)
    integration, framework = _named(environ, "integration"), _named(environ, "framework")
    host = read_group(environ, "settings", _PLAIN)
    return Settings(
        engine=engine.values,
        override=override,
        additional_config=additional,
        models=tuple(models),
        extra_args=tuple(extra_args),
        device=dev,
        integration=integration,
        framework=framework,
        artifacts=artifacts.values.get("artifacts"),
        engine_port=engine_port,
        serve=serve,
        passthrough_env={v.name: environ[v.name] for v in ENGINE_ENV if v.name in environ},
        warnings=tuple(warnings),
        fit=parse_fit(environ),
        stage=parse_stage(environ),
        **host,
    )
