"""The launch plan of this machine: settings + host facts -> LaunchPlan, the one call the serve, stage,
plan and cache commands (and the ECS renderer) make.

The top-level wiring around the pure core, kept out of each package it joins: `config/` parses the
settings, `host/` reads serving.properties (SM_MODEL_DIR's and the served model directory's) and the
host facts (the only I/O), `plan/` builds the plan.
It is none of them (host/ reads the machine, plan/ is pure, commands/ is the CLI), so it lives beside
`cli.py`. Tests pass `facts=` to plan for any instance type on any machine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace

from neuronserve.config.settings import Settings, parse_settings
from neuronserve.config.table import VARS
from neuronserve.host import facts as hostfacts
from neuronserve.host import properties
from neuronserve.plan.assets import kinds as assets
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts
from neuronserve.plan.fit.estimate import Workload
from neuronserve.types import LaunchPlan


def read_settings(
    environ: Mapping[str, str], *, device: str | None = None, extra_args: Sequence[str] = ()
) -> Settings:
    """The settings, with LMI's serving.properties from SM_MODEL_DIR and, when the model served is another
    local directory (SM_VLLM_MODEL, OPTION_MODEL_ID, HF_MODEL_ID), from that directory too: that file
    wins a key both set, each such key said in the warnings (host/properties.py merge)."""
    model_dir: str = VARS["SM_MODEL_DIR"].read(environ)
    props = properties.read_serving_properties(model_dir)
    settings = parse_settings(environ, device=device, extra_args=extra_args, serving_properties=props)
    own = properties.served_model_dir(settings.models, model_dir)
    own_props = properties.read_serving_properties(own) if own else {}
    if not own or not own_props:
        return settings
    merged, files, notes = properties.merge(props, own_props, own, model_dir)
    settings = parse_settings(
        environ, device=device, extra_args=extra_args, serving_properties=merged, property_files=files
    )
    return replace(settings, warnings=(*settings.warnings, *notes))


def _local_candidates(settings: Settings) -> list[str]:
    paths = [str(m.value) for m in settings.models]
    spec = settings.get("speculative-config")
    try:
        cfg = json.loads(spec) if isinstance(spec, str) else None
    except ValueError:
        cfg = None
    if isinstance(cfg, dict) and isinstance(cfg.get("model"), str):
        paths.append(cfg["model"])
    return paths + assets.local_candidates(settings)


def resolve_plan(
    environ: Mapping[str, str],
    *,
    device: str | None = None,
    extra_args: Sequence[str] = (),
    facts: HostFacts | None = None,
    workload: Workload | None = None,
) -> LaunchPlan:
    """Build the launch plan from an environment mapping (read once by the CLI) and CLI choices."""
    settings = read_settings(environ, device=device, extra_args=extra_args)
    if facts is None:
        facts = hostfacts.gather(environ, _local_candidates(settings))
    return build_plan(settings, facts, workload=workload)
