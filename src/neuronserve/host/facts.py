"""Host facts: everything the plan needs to know about this machine, gathered in one place.

The plan itself never looks at the host (`neuronserve.plan.facts` holds the shapes it is given).
Gathering is read-only and fast: no network, no vLLM import (that would pull torch and take seconds),
and `neuron-ls` only where a Neuron device exists and NEURON_RT_VISIBLE_CORES does not already say.
Each kind of fact has its module: devices (NeuronCores), versions (installed packages, the vLLM launch
module), modelfiles (config.json, safetensors, the weights digest), properties (serving.properties),
clitables (the packaged vLLM option tables), nxdi (the installed NxD Inference's model registry, read
from its files).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping

from neuronserve.config.table import VARS
from neuronserve.host import clitables
from neuronserve.host.devices import neuron_devices, visible_cores
from neuronserve.host.modelfiles import model_facts, parse_config_json, safetensors_params, weights_digest
from neuronserve.host.nxdi import installed_model_types
from neuronserve.host.properties import holds_model, read_serving_properties
from neuronserve.host.versions import installed_versions, vllm_module
from neuronserve.plan.facts import HostFacts, ModelFacts

__all__ = [
    "gather",
    "installed_versions",
    "model_facts",
    "parse_config_json",
    "read_serving_properties",
    "safetensors_params",
    "weights_digest",
]


def gather(environ: Mapping[str, str], model_paths: Iterable[str] = ()) -> HostFacts:
    """Collect the facts once, at the entrypoint (the only impure part of planning)."""
    devices = neuron_devices()
    cores = visible_cores(environ, devices)
    model_dir: str = VARS["SM_MODEL_DIR"].read(environ)
    paths: dict[str, ModelFacts] = {}
    for p in model_paths:
        if p and not p.startswith("s3://") and (os.path.sep in p or os.path.exists(p)):
            paths[p] = model_facts(p)
    holds = holds_model(model_dir)  # a lone serving.properties is configuration (its option.model_id)
    if holds:
        paths[model_dir] = model_facts(model_dir)
    return HostFacts(
        python=sys.executable or "python3",
        vllm_module=vllm_module(),
        neuron_devices=devices,
        visible_cores=cores.visible,
        cores_source=cores.source,
        logical_nc_config=cores.logical_nc_config,
        physical_cores=cores.physical,
        versions=installed_versions(),
        nxdi_models=installed_model_types(),
        sagemaker_model_dir=model_dir,
        sagemaker_model_dir_nonempty=holds,
        paths=paths,
        cpus=tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else (),
        option_tables=clitables.load_all(),
    )
