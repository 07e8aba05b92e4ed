"""NeuronCores per SageMaker instance type, and the tensor-parallel check made before anything is created.

TP larger than the instance's NeuronCores fails only after the model is downloaded and compiled (the
plan refuses it on the host too: `check_tp` in plan/), so the deploy script refuses it up front. The core
counts are plan/fit/instances.py's, from the Neuron documentation's instance pages (e.g.
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/inf2-arch.html).
"""

from __future__ import annotations

from collections.abc import Mapping

from neuronserve.counts import positive
from neuronserve.errors import ConfigError
from neuronserve.plan.fit import instances as plan_instances

# From the one instance table (plan/fit/instances.py); logical cores on Trn2 (NEURON_LOGICAL_NC_CONFIG=2).
NEURON_CORES: dict[str, int] = {
    f"ml.{name}": plan_instances.neuron_cores(name) for name in plan_instances.INSTANCES
}

# Where users already put the tensor-parallel degree, in the order neuronserve reads them.
TP_VARIABLES = (
    "SM_VLLM_TENSOR_PARALLEL_SIZE",
    "OPTION_TENSOR_PARALLEL_DEGREE",
    "TENSOR_PARALLEL_DEGREE",
    "HF_NUM_CORES",
)


def neuron_cores(instance_type: str) -> int:
    try:
        return NEURON_CORES[instance_type]
    except KeyError:
        known = ", ".join(sorted(NEURON_CORES))
        raise ConfigError(f"--instance-type {instance_type}: not a Neuron instance type ({known})") from None


def tensor_parallel_size(env: Mapping[str, str], instance_type: str) -> int:
    """The configured TP degree (`max` = every core of the instance); 1 when none is set."""
    cores = neuron_cores(instance_type)
    for name in TP_VARIABLES:
        raw = env.get(name, "").strip()
        if not raw:
            continue
        if raw.lower() == "max":
            return cores
        tp = positive(raw)
        if tp is None:
            raise ConfigError(f"{name}={raw}: expected a positive integer or 'max'")
        return tp
    return 1


def check_tensor_parallel(env: Mapping[str, str], instance_type: str) -> int:
    tp = tensor_parallel_size(env, instance_type)
    cores = neuron_cores(instance_type)
    if tp > cores:
        raise ConfigError(
            f"tensor parallel size {tp} exceeds the {cores} NeuronCores of {instance_type}: "
            f"set SM_VLLM_TENSOR_PARALLEL_SIZE <= {cores} or pick a larger instance"
        )
    return tp
