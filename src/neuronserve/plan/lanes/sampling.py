"""The one check of an on_device_sampling_config both lane generations take: a JSON object of the keys
the lane's sampler reads, or null (CPU sampling; the caller handles null before calling).

Each lane keeps its own keys and its own words for an unknown one: NxD Inference drops unknown keys
silently (plan/lanes/nxdi/overrides.py), vllm-neuron 0.24 lists four (plan/lanes/native/engine.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neuronserve.errors import ConfigError

# (the unknown keys, the keys the lane takes; each comma-separated, sorted) -> why they are refused
UnknownKeys = Callable[[str, str], str]


def sampling_config(value: Any, var: str, allowed: frozenset[str], unknown: UnknownKeys) -> dict[str, Any]:
    """`value` (set by `var`) as the sampling object it must be: refused when it is no JSON object, or
    when it names a key outside `allowed` (the message is `var: ` and what `unknown` says)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{var} must be a JSON object or null", (var,))
    extra = sorted(set(value) - allowed)
    if extra:
        raise ConfigError(f"{var}: {unknown(', '.join(extra), ', '.join(sorted(allowed)))}", (var,))
    return value
