"""The value checks of the generate parameters (genparams.py): each returns the value the engine or
the front uses, or raises `Invalid` naming the parameter, its bound and the value sent. Pure."""

from __future__ import annotations

import math
from typing import Any

from neuronserve.front.errors import Invalid
from neuronserve.front.schema import TooDeep, loads


def bad(msg: str) -> Invalid:
    return Invalid(f"invalid generate request: {msg}")


def number(
    name: str, v: Any, lo: float | None = None, hi: float | None = None, lo_open: bool = False
) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not _finite(v):
        raise bad(f"parameters.{name} must be a number, got {_shown(v)}")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise bad(f"parameters.{name} must be {'>' if lo_open else '>='} {lo}, got {_shown(v)}")
    if hi is not None and v > hi:
        raise bad(f"parameters.{name} must be <= {hi}, got {_shown(v)}")
    return float(v)


def _finite(v: float) -> bool:
    """math.isfinite converts an int to a float first: 10**400 raised OverflowError (a 500)."""
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def _shown(v: Any) -> str:
    """A value for an error message, cut short: a 4000-digit number must not fill the answer."""
    text = repr(v)
    return text if len(text) <= 80 else text[:80] + "..."


def integer(name: str, v: Any, lo: int, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        bound = f">= {lo}" + (f" and <= {hi}" if hi is not None else "")
        raise bad(f"parameters.{name} must be an integer {bound}, got {_shown(v)}")
    return v


def boolean(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise bad(f"parameters.{name} must be true or false, got {_shown(v)}")
    return v


def strings(name: str, v: Any, limit: int) -> list[str]:
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise bad(f"parameters.{name} must be a string or a list of strings")
    if len(items) > limit:
        raise bad(f"parameters.{name} has {len(items)} entries; at most {limit}")
    return [s for s in items if s]


def token_ids(name: str, v: Any) -> list[int]:
    if not isinstance(v, list) or not all(type(x) is int and x >= 0 for x in v):
        raise bad(f"parameters.{name} must be a list of token ids")
    return list(v)


def grammar(v: Any) -> dict[str, Any] | None:
    """TGI GrammarType -> vLLM structured_outputs ({"json": schema} or {"regex": pattern})."""
    if not isinstance(v, dict) or not isinstance(v.get("type"), str) or "value" not in v:
        raise bad('parameters.grammar must be {"type": "json" | "json_schema" | "regex", "value": ...}')
    kind, value = v["type"], v["value"]
    if kind == "regex":
        if not isinstance(value, str) or not value:
            raise bad("parameters.grammar: a regex grammar's value must be a non-empty string")
        return {"regex": value}
    if kind in ("json", "json_schema"):
        if kind == "json_schema" and isinstance(value, dict) and isinstance(value.get("schema"), dict):
            value = value["schema"]  # TGI 3.x: {"name": ..., "schema": {...}}
        if isinstance(value, str):
            try:
                value = loads(value)
            except TooDeep as err:
                raise bad(f"parameters.grammar: a json grammar's value is {err}") from None
            except ValueError:
                raise bad("parameters.grammar: a json grammar's value must be a JSON schema") from None
        if not isinstance(value, dict):
            raise bad("parameters.grammar: a json grammar's value must be a JSON schema object")
        return {"json": value}
    raise bad(f"parameters.grammar.type {kind!r} is not one of json, json_schema, regex")


def adapter_name(name: str, v: Any) -> str:
    if not isinstance(v, str):
        raise bad(f"parameters.{name} must be a string (a LoRA adapter's name), got {v!r}")
    return v


def served_adapter(adapter: str, adapters: tuple[str, ...]) -> str:
    """TGI's `adapter_id`, one of the adapters the engine serves (vLLM selects it by name as `model`)."""
    if adapter not in adapters:
        served = ", ".join(adapters) if adapters else "none"
        raise bad(
            f"parameters.adapter_id={adapter!r} is not a LoRA adapter this endpoint serves; "
            f"served adapters: {served}"
        )
    return adapter
