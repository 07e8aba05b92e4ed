"""How one variable's text becomes a typed value: the parsers the rows of the settings table name.

A parser takes the row (for its name and default, which its messages quote) and the raw text as set
(never empty: an unset or blank variable takes the row's default without being parsed). Each raises
one ConfigError naming the variable, so a typo is refused before anything is staged or started.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
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


# A number as people write one in decimal: digits with an optional sign, fraction and exponent. Python's
# float() also takes "nan", "inf", "1_0" and other scripts' digits, none of which a setting means.
_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
_SHOWN = 80  # characters of a value a message quotes (a 100 KB value must not fill the terminal)


def shown(raw: str) -> str:
    """A value as a message quotes it: repr, cut after `_SHOWN` characters."""
    if len(raw) <= _SHOWN:
        return repr(raw)
    return f"{raw[:_SHOWN]!r}... ({len(raw)} characters)"


def _decimal(raw: str) -> float | None:
    """A finite number written in decimal, or None."""
    if not _DECIMAL.fullmatch(raw):
        return None
    value = float(raw)
    return value if math.isfinite(value) else None


def number(var: Var, raw: str) -> float:
    """A non-negative number; a typo here would otherwise surface as a crash after staging."""
    stripped = raw.strip()
    value = _decimal(stripped)
    if value is None:
        raise ConfigError(f"{var.name}={shown(stripped)} is not a number", (var.name,))
    if value < 0:
        raise ConfigError(f"{var.name}={shown(stripped)} must not be negative", (var.name,))
    return value


def number_or_default(var: Var, raw: str) -> float:
    """A non-negative number where 0 means the default (a limit of 0 MB or 0 s would refuse everything)."""
    return number(var, raw) or float(var.default)


def whole_number(var: Var, raw: str) -> int:
    """A whole number >= 0 in decimal digits (a port, a count): "8080.9", "1e3", "1_0", "nan" and "inf"
    are refused, not rounded (`int(float(raw))` read the first three as numbers and crashed on the last
    two)."""
    value = whole(raw)
    if value is None:
        stripped = raw.strip()
        number(var, stripped)  # not a number at all, or negative: that message
        raise ConfigError(
            f"{var.name}={shown(stripped)} must be a whole number (digits only, e.g. {var.default or 1})",
            (var.name,),
        )
    return value


def whole_between(least: int, most: int) -> Parser:
    """A parser taking a whole number from `least` to `most`; outside that range the value is refused
    naming the range, never clamped to it (a clamp hides the typo)."""

    def parse(var: Var, raw: str) -> int:
        value = whole_number(var, raw)
        if not least <= value <= most:
            raise ConfigError(
                f"{var.name}={value} is out of range: use a whole number from {least} to {most}", (var.name,)
            )
        return value

    return parse


port = whole_between(1, 65535)  # a TCP port another process listens on (the engine's: known in advance)
listen_port = whole_between(0, 65535)  # a TCP port this process binds; 0 takes any free one


def listen_address(var: Var, raw: str) -> str:
    """An IPv4 or IPv6 address this process binds (a literal: a name would resolve at bind time)."""
    value = raw.strip()
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ConfigError(
            f"{var.name}={shown(value)} is not an IP address: use 0.0.0.0 (every interface) or "
            "127.0.0.1 (this host only)",
            (var.name,),
        ) from None


def boolean(var: Var, raw: str) -> bool:
    """true/false or 1/0, in any case."""
    value = raw.strip().lower()
    if value not in ("true", "false", "1", "0"):
        raise ConfigError(f"{var.name}={shown(value)} is not a boolean: use true or false", (var.name,))
    return value in ("true", "1")


def at_least_one(var: Var, raw: str) -> int:
    """A count of things that must exist (e.g. READY replicas): a whole number >= 1."""
    value = positive(raw)
    if value is None:
        raise ConfigError(f"{var.name}={shown(raw.strip())} must be a whole number >= 1", (var.name,))
    return value


def count_or_auto(var: Var, raw: str) -> int | None:
    """A count >= 1, or `auto` (None: the reader derives it, e.g. one front worker per replica)."""
    if raw.strip().lower() == "auto":
        return None
    value = positive(raw)
    if value is None:
        raise ConfigError(f"{var.name}={shown(raw.strip())} must be a whole number >= 1 or auto", (var.name,))
    return value


def niceness(var: Var, raw: str) -> int:
    """A process niceness above the front's: a whole number from 0 to 19 (Linux's range)."""
    value = number(var, raw)
    if value != int(value) or value > 19:
        raise ConfigError(f"{var.name}={shown(raw)} must be a whole number from 0 to 19", (var.name,))
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
        raise ConfigError(f"{name}={shown(value)} is not one of: {', '.join(allowed)}", (name,))
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
        raise ConfigError(f"{var.name}={shown(raw)} is not a boolean: use true or false", (var.name,))
    return value != "false"


def lmi_dtype(var: Var, raw: str) -> str:
    """fp16 / bf16 / fp32 as LMI and TGI spell them, or a vLLM dtype as is."""
    value = raw.strip()
    return _LMI_DTYPES.get(value.lower(), value)


def lmi_count(var: Var, raw: str) -> str:
    """Decimal digits (whole: "²" passes isdigit and crashed int() later in the plan)."""
    if whole(raw) is None:
        raise ConfigError(f"{var.name}={shown(raw)} is not a positive integer", (var.name,))
    return raw.strip()


def lmi_cores(var: Var, raw: str) -> str:
    """A NeuronCore count, or `max` for every visible core."""
    if whole(raw) is None and raw.strip().lower() != "max":
        raise ConfigError(f"{var.name}={shown(raw)} is not a positive integer or max", (var.name,))
    return raw.strip().lower()


# Engine settings: the SM_VLLM_* mapping of the AWS vLLM DLC and the JSON objects of the Neuron override.


def json_or_none(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def sm_vllm_value(raw: str) -> EngineValue:
    """One SM_VLLM_* value as the AWS vLLM DLC maps it onto vLLM's argv (aws/deep-learning-containers,
    vllm/build_artifacts/sagemaker_entrypoint.sh: `SM_VLLM_FOO_BAR=x` is `--foo-bar x`, empty is the
    bare flag), with true/false and JSON as the README's configuration reference says."""
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
            f"{var.name}={shown(raw.strip())} is a switch (vLLM's --{var.key} takes no value): "
            "use true or false",
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
