"""A setting's value and the variable that gave it, and the one check every source goes through:
two sources that give the same setting different values are refused, naming both.

Values are compared in a canonical form (numbers by value, true/false/max in any case), so
`SM_VLLM_MAX_NUM_SEQS=08` and `-- --max-num-seqs 8` agree instead of being reported as a conflict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from neuronserve.counts import whole
from neuronserve.errors import ConfigError


@dataclass(frozen=True)
class Setting:
    """A value and the variable that gave it (named in every message about it)."""

    value: Any
    origin: str


def canon(value: Any) -> Any:
    """The form two sources' values are compared in: numbers by value, true/false/max in any case.

    One leading "-", then a whole number (counts.whole): "--4" and "²" passed lstrip("-").isdigit()
    and crashed int(). "- 4" stays text (its digits must follow the sign)."""
    if isinstance(value, str):
        text = value.strip()
        body = text.removeprefix("-")
        if body == body.strip() and whole(body) is not None:
            return int(text)
        return text.lower() if text.lower() in ("true", "false", "max") else text
    return value


class Collector:
    """Adds values source by source (highest precedence first) and refuses disagreements."""

    def __init__(self) -> None:
        self.values: dict[str, Setting] = {}

    def add(self, key: str, value: Any, origin: str) -> None:
        old = self.values.get(key)
        if old is None:
            self.values[key] = Setting(value, origin)
        elif canon(old.value) != canon(value):
            raise ConfigError(
                f"{old.origin}={show(old.value)} and {origin}={show(value)} both set {key} with different "
                f"values: remove one of them or make them equal",
                (old.origin, origin),
            )


def show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
