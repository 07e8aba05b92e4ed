"""How one variable's text becomes a typed value: the parsers the rows of the settings table name.

A parser takes the row (for its name and default, which its messages quote) and the raw text as set
(never empty: an unset or blank variable takes the row's default without being parsed). Each raises
one ConfigError naming the variable, so a typo is refused before anything is staged or started.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from neuronserve.counts import positive, whole
from neuronserve.errors import ConfigError

if TYPE_CHECKING:
    from neuronserve.config.var import Var

Parser = Callable[["Var", str], Any]
EngineValue = bool | str | list[str]  # True = bare flag, False = off, str = one token, list = tokens

_LMI_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def text(var: Var, raw: str) -> str:
    """The text as set, blanks around it dropped."""
    return raw.strip()


def number(var: Var, raw: str) -> float:
    """A non-negative number; a typo here would otherwise surface as a crash after staging."""
    stripped = raw.strip()
    try:
        value = float(stripped)
    except ValueError:
        raise ConfigError(f"{var.name}={stripped!r} is not a number", (var.name,)) from None
    if value < 0:
        raise ConfigError(f"{var.name}={stripped!r} must not be negative", (var.name,))
    return value


def number_or_default(var: Var, raw: str) -> float:
    """A non-negative number where 0 means the default (a limit of 0 MB or 0 s would refuse everything)."""
    return number(var, raw) or float(var.default)


def whole_number(var: Var, raw: str) -> int:
    """A non-negative number, its fraction dropped (a port or a count given as `8080.0` is 8080)."""
    return int(number(var, raw))


def boolean(var: Var, raw: str) -> bool:
    """true/false or 1/0, in any case."""
    value = raw.strip().lower()
    if value not in ("true", "false", "1", "0"):
        raise ConfigError(f"{var.name}={value!r} is not a boolean: use true or false", (var.name,))
    return value in ("true", "1")


def at_least_one(var: Var, raw: str) -> int:
    """A count of things that must exist (e.g. READY replicas): a whole number >= 1."""
    value = positive(raw)
    if value is None:
        raise ConfigError(f"{var.name}={raw.strip()!r} must be a whole number >= 1", (var.name,))
    return value


def niceness(var: Var, raw: str) -> int:
    """A process niceness above the front's: a whole number from 0 to 19 (Linux's range)."""
    value = number(var, raw)
    if value != int(value) or value > 19:
        raise ConfigError(f"{var.name}={raw!r} must be a whole number from 0 to 19", (var.name,))
    return int(value)


def seconds_above_zero(var: Var, raw: str) -> float:
    """A lifetime in seconds: 0 would expire every session at once."""
    value = number(var, raw)
    if value <= 0:
        raise ConfigError(
            f"{var.name} must be a positive number of seconds (default {var.default:g})", (var.name,)
        )
    return value


def gib_above_zero(var: Var, raw: str) -> float:
    """A memory size in GiB that a division is made by."""
    value = number(var, raw)
    if value <= 0:
        raise ConfigError(f"{var.name} must be above 0 (e.g. 16)", (var.name,))
    return value


def one_of(name: str, value: str, allowed: tuple[str, ...]) -> str:
    """`value` when it is one of `allowed`, else the error naming `name` and every allowed value."""
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not one of: {', '.join(allowed)}", (name,))
    return value


def choice(*allowed: str) -> Parser:
    """A parser taking one of `allowed`, in any case."""

    def parse(var: Var, raw: str) -> str:
        return one_of(var.name, raw.strip().lower(), allowed)

    return parse


# LMI and TGI names: values normalised for the conflict checks against the SM_VLLM_* value of the
# same engine setting (a count stays text there: "0042" and "42" are compared by value later).


def lmi_bool(var: Var, raw: str) -> bool:
    """LMI's booleans: true/false in any case; empty is true (a bare LMI option turns it on)."""
    value = raw.strip().lower()
    if value not in ("true", "false", ""):
        raise ConfigError(f"{var.name}={raw!r} is not a boolean: use true or false", (var.name,))
    return value != "false"


def lmi_dtype(var: Var, raw: str) -> str:
    """fp16 / bf16 / fp32 as LMI and TGI spell them, or a vLLM dtype as is."""
    value = raw.strip()
    return _LMI_DTYPES.get(value.lower(), value)


def lmi_count(var: Var, raw: str) -> str:
    """Decimal digits (whole: "²" passes isdigit and crashed int() later in the plan)."""
    if whole(raw) is None:
        raise ConfigError(f"{var.name}={raw!r} is not a positive integer", (var.name,))
    return raw.strip()


def lmi_cores(var: Var, raw: str) -> str:
    """A NeuronCore count, or `max` for every visible core."""
    if whole(raw) is None and raw.strip().lower() != "max":
        raise ConfigError(f"{var.name}={raw!r} is not a positive integer or max", (var.name,))
    return raw.strip().lower()


# Engine settings: the SM_VLLM_* mapping of the AWS vLLM DLC and the JSON objects of the Neuron override.


def json_or_none(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def sm_vllm_value(raw: str) -> EngineValue:
    """The AWS vLLM DLC mapping of one SM_VLLM_* value (documented in SERVING.md)."""
    stripped = raw.strip()
    if stripped == "" or stripped.lower() == "true":
        return True
    if stripped.lower() == "false":
        return False
    if stripped.startswith("[") or stripped.startswith("{"):
        parsed = json_or_none(stripped)
        if isinstance(parsed, list):
            return [p if isinstance(p, str) else json.dumps(p, sort_keys=True) for p in parsed]
        if isinstance(parsed, dict):
            return json.dumps(parsed, sort_keys=True)
    return raw


def sm_vllm(var: Var, raw: str) -> EngineValue:
    """One vLLM flag's value (`sm_vllm_value`); read even when empty (an empty value is the bare flag)."""
    return sm_vllm_value(raw)


def sm_vllm_switch(var: Var, raw: str) -> EngineValue:
    """A vLLM flag that takes no value (`--enable-lora`): empty or true turns it on, false off. Any other
    text would be rendered as `--flag text`, a stray argument vLLM refuses at start (or, for
    prefix caching, read as off without a word), so it is refused here naming the variable."""
    value = sm_vllm_value(raw)
    if not isinstance(value, bool):
        raise ConfigError(
            f"{var.name}={raw.strip()!r} is a switch (vLLM's --{var.key} takes no value): use true or false",
            (var.name,),
        )
    return value


def object_named(name: str, raw: str) -> dict[str, Any]:
    """A JSON object, or the error naming the variable `name` (as spelled) with an example."""
    parsed = json_or_none(raw.strip())
    if not isinstance(parsed, dict):
        raise ConfigError(f"{name} must be a JSON object, e.g. '{{\"enable_bucketing\": false}}'", (name,))
    return parsed


def json_object(var: Var, raw: str) -> dict[str, Any]:
    """A JSON object (the override and additional config)."""
    return object_named(var.name, raw)


def override_value(var: Var, raw: str) -> Any:
    """SM_NEURON_<KEY> values: true/false in any case are booleans, else JSON when they parse (numbers,
    null, objects), else the string. Python's `False` is no JSON and was kept as the string "False",
    which NxD Inference reads as true (SM_NEURON_ENABLE_BUCKETING=False left bucketing on)."""
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    try:
        return json.loads(raw)
    except ValueError:
        return raw
