"""Fit-check settings: which instance to plan for and how far to trust the HBM estimate.

The refusal rests on an estimate (plan/memory.py), so every number in it can be replaced by someone
who knows better: the HBM per core, the per-core overhead, or the check itself (warn or off).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from neuronserve.config.serve import parse_bool, parse_num
from neuronserve.errors import ConfigError

FIT_MODES = ("refuse", "warn", "off")


@dataclass(frozen=True)
class FitOptions:
    instance_type: str | None = None  # NEURONSERVE_INSTANCE_TYPE (`ml.inf2.xlarge` or `inf2.xlarge`)
    mode: str = "refuse"  # NEURONSERVE_FIT_CHECK: refuse | warn | off
    hbm_gib_per_core: float | None = None  # NEURONSERVE_HBM_GIB_PER_CORE replaces the table's figure
    overhead_gib: float | None = None  # NEURONSERVE_HBM_OVERHEAD_GIB replaces the default overhead
    require_cache_hit: bool = False  # NEURONSERVE_REQUIRE_CACHE_HIT


def parse_fit(environ: Mapping[str, str]) -> FitOptions:
    mode = environ.get("NEURONSERVE_FIT_CHECK", "").strip().lower() or "refuse"
    if mode not in FIT_MODES:
        raise ConfigError(
            f"NEURONSERVE_FIT_CHECK={mode!r} is not one of: {', '.join(FIT_MODES)}",
            ("NEURONSERVE_FIT_CHECK",),
        )
    hbm = parse_num(environ, "NEURONSERVE_HBM_GIB_PER_CORE", None)
    if hbm is not None and hbm <= 0:
        raise ConfigError(
            "NEURONSERVE_HBM_GIB_PER_CORE must be above 0 (e.g. 16)", ("NEURONSERVE_HBM_GIB_PER_CORE",)
        )
    return FitOptions(
        instance_type=environ.get("NEURONSERVE_INSTANCE_TYPE", "").strip() or None,
        mode=mode,
        hbm_gib_per_core=hbm,
        overhead_gib=parse_num(environ, "NEURONSERVE_HBM_OVERHEAD_GIB", None),
        require_cache_hit=parse_bool(environ, "NEURONSERVE_REQUIRE_CACHE_HIT"),
    )
