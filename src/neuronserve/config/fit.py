"""Fit-check settings: which instance to plan for and how far to trust the HBM estimate.

The refusal rests on an estimate (plan/fit/memory.py), so every number in it can be replaced by someone
who knows better: the HBM per core, the per-core overhead, or the check itself (warn or off). Each
attribute is one row of the settings table (`field` "fit.<attr>"): its default, parser and message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from neuronserve.config.table import defaults, read_group
from neuronserve.config.var import FIT_MODES

__all__ = ["FIT_MODES", "FitOptions", "parse_fit"]

_DEFAULTS = defaults("fit")


@dataclass(frozen=True)
class FitOptions:
    instance_type: str | None = _DEFAULTS["instance_type"]  # `ml.inf2.xlarge` or `inf2.xlarge`
    mode: str = _DEFAULTS["mode"]  # refuse | warn | off
    hbm_gib_per_core: float | None = _DEFAULTS["hbm_gib_per_core"]  # replaces the instance table's figure
    overhead_gib: float | None = _DEFAULTS["overhead_gib"]  # replaces plan/fit/memory.py's default overhead
    require_cache_hit: bool = _DEFAULTS["require_cache_hit"]  # a cache miss fails the start


def parse_fit(environ: Mapping[str, str]) -> FitOptions:
    """FitOptions from the environment, each attribute through its row, checked in attribute order."""
    return FitOptions(**read_group(environ, "fit", tuple(f.name for f in fields(FitOptions))))
