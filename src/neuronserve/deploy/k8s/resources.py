"""What one pod asks of its node: Neuron cores or devices from the plan, CPU and memory in proportion.

The Neuron device plugin advertises two extended resources: `aws.amazon.com/neuroncore` (single cores)
and `aws.amazon.com/neuron` (whole devices, "all the cores belonging to the device"); a pod that asks
for more than one of either needs the Neuron scheduler extension, which finds directly connected
devices and hands the container their cores in NEURON_RT_VISIBLE_CORES
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/tutorials/k8s-neuron-device-plugin.html,
.../k8s-neuron-scheduler.html, .../k8s-neuron-scheduler-flow.html).

The unit is the core the runtime sees. On Inf2 and Trn1 that is a physical NeuronCore (two per
device: a trn1.32xlarge node advertises 32 neuroncore and 16 neuron, the device plugin page's
example). On Trn2 the Logical NeuronCore configuration groups physical cores; with the device plugin it
is a node setting (LNC 2 unless the launch template writes /opt/aws/neuron/logical_nc_config: EKS
prerequisites, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/tutorials/k8s-prerequisite.html).
The plugin's pages do not spell out the unit of `neuroncore` there; it hands the container its cores in
NEURON_RT_VISIBLE_CORES, which the runtime reads as logical cores, the unit `tensor_parallel_size`
counts too (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html),
so a pod asks for the plan's TP x DP logical cores, and a Trn2 device holds 8 / LNC of them. The node's
LNC must equal the plan's (NEURON_LOGICAL_NC_CONFIG, default 2): said on stderr. Whole devices
(`--neuron-resource device`) do not depend on that reading.

On trn1.32xlarge and trn1n.32xlarge (a 2D torus) the scheduler extension places only 1, 4, 8 or 16
devices per container; another count never schedules, so it is refused here.

CPU and memory: the pod's share of the node (its Neuron units over the node's), of 85 % of the
instance's vCPUs and memory (the rest is the kubelet's, the system's and the DaemonSets'). Memory is
requested and limited alike; the memory-backed /dev/shm is charged to the same limit. vCPUs and memory
by instance: the Neuron documentation's architecture pages (inf2-arch, trn1-arch, trn2-arch: "vCPUs",
"Host Memory (GiB)"); trn2.3xlarge from https://aws.amazon.com/ec2/instance-types/trn2/.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from neuronserve.errors import ConfigError
from neuronserve.plan.fit import instances

NeuronResource = Literal["neuroncore", "device"]
RESOURCE_NAMES: dict[str, str] = {
    "neuroncore": "aws.amazon.com/neuroncore",
    "device": "aws.amazon.com/neuron",
}
# instance -> (vCPUs, host memory GiB)
HOST: dict[str, tuple[int, int]] = {
    "inf2.xlarge": (4, 16),
    "inf2.8xlarge": (32, 128),
    "inf2.24xlarge": (96, 384),
    "inf2.48xlarge": (192, 768),
    "trn1.2xlarge": (8, 32),
    "trn1.32xlarge": (128, 512),
    "trn1n.32xlarge": (128, 512),
    "trn2.3xlarge": (12, 128),
    "trn2.48xlarge": (192, 2048),
    "trn2u.48xlarge": (192, 2048),
}
ALLOCATABLE = 0.85
SHM_MAX_MIB = 4096
# Device counts the scheduler extension places on a 2D-torus node (k8s-neuron-scheduler.html).
TORUS_DEVICES = {"trn1.32xlarge": (1, 4, 8, 16), "trn1n.32xlarge": (1, 4, 8, 16)}


@dataclass(frozen=True)
class PodSize:
    resource: str  # aws.amazon.com/neuroncore or aws.amazon.com/neuron
    units: int  # of that resource
    visible_cores: int  # cores the container will see (a whole device's when devices are asked)
    cpu_millis: int
    memory_mib: int
    shm_mib: int
    needs_scheduler: bool  # more than one unit: the Neuron scheduler extension places the pod

    def neuron(self) -> dict[str, int]:
        return {self.resource: self.units}


def cores_per_device(instance: str, lnc: int) -> int:
    chip = instances.INSTANCES[instance][0]
    return chip.physical_cores // lnc


def size_pod(instance: str, cores: int, lnc: int, kind: NeuronResource) -> PodSize:
    """The pod that runs `cores` (logical) NeuronCores of `instance` at `lnc`, asked as `kind`."""
    per_device = cores_per_device(instance, lnc)
    chips = instances.INSTANCES[instance][1]
    devices = math.ceil(cores / per_device)
    allowed = TORUS_DEVICES.get(instance)
    if allowed and devices not in allowed:
        raise ConfigError(
            f"{cores} NeuronCores = {devices} devices of {instance}: the Neuron scheduler extension places "
            f"only {', '.join(map(str, allowed))} devices per pod on its 2D torus, so this pod would never "
            f"schedule: choose TP x DP of {', '.join(str(d * per_device) for d in allowed)} cores",
            ("SM_VLLM_TENSOR_PARALLEL_SIZE", "NEURONSERVE_DATA_PARALLEL"),
        )
    if kind == "device":
        units, visible, share = devices, devices * per_device, devices / chips
    else:
        units, visible, share = cores, cores, cores / (chips * per_device)
    vcpus, memory_gib = HOST[instance]
    memory = int(memory_gib * 1024 * ALLOCATABLE * share)
    return PodSize(
        resource=RESOURCE_NAMES[kind],
        units=units,
        visible_cores=visible,
        cpu_millis=max(250, int(vcpus * 1000 * ALLOCATABLE * share)),
        memory_mib=memory,
        shm_mib=min(SHM_MAX_MIB, memory // 4),
        needs_scheduler=units > 1,
    )
