"""A pod's size (deploy/k8s/resources.py): Neuron units for the plan's cores at the node's LNC, as cores or
whole devices; the torus rule of trn1.32xlarge; CPU and memory in proportion to the node."""

from __future__ import annotations

import pytest

from neuronserve.deploy.k8s.resources import size_pod
from neuronserve.errors import ConfigError


@pytest.mark.parametrize(
    ("instance", "cores", "lnc", "kind", "resource", "units", "visible"),
    [
        ("inf2.xlarge", 2, 1, "neuroncore", "aws.amazon.com/neuroncore", 2, 2),
        ("inf2.48xlarge", 1, 1, "neuroncore", "aws.amazon.com/neuroncore", 1, 1),
        ("inf2.48xlarge", 3, 1, "device", "aws.amazon.com/neuron", 2, 4),  # 2 cores per device
        ("trn1.32xlarge", 8, 1, "device", "aws.amazon.com/neuron", 4, 8),
        (
            "trn2.48xlarge",
            16,
            2,
            "device",
            "aws.amazon.com/neuron",
            4,
            16,
        ),  # 8 physical / LNC 2 = 4 per device
        ("trn2.48xlarge", 16, 1, "device", "aws.amazon.com/neuron", 2, 16),
        ("trn2.3xlarge", 4, 2, "neuroncore", "aws.amazon.com/neuroncore", 4, 4),
    ],
)
def test_units_and_visible_cores(
    instance: str, cores: int, lnc: int, kind: str, resource: str, units: int, visible: int
) -> None:
    size = size_pod(instance, cores, lnc, kind)  # type: ignore[arg-type]
    assert (size.resource, size.units, size.visible_cores) == (resource, units, visible)
    assert size.neuron() == {resource: units}
    assert size.needs_scheduler is (units > 1)


def test_a_whole_node_gets_most_of_its_cpu_and_memory() -> None:
    size = size_pod("inf2.xlarge", 2, 1, "neuroncore")
    assert (size.cpu_millis, size.memory_mib) == (3400, 13926)  # 85 % of 4 vCPUs and 16 GiB
    assert size.shm_mib == 3481  # a quarter of the memory, under the 4 GiB cap
    quarter = size_pod("inf2.48xlarge", 6, 1, "neuroncore")  # 6 of 24 cores
    assert (quarter.cpu_millis, quarter.memory_mib, quarter.shm_mib) == (40800, 167116, 4096)


@pytest.mark.parametrize(
    ("cores", "ok"), [(2, True), (4, False), (8, True), (12, False), (16, True), (32, True)]
)
def test_trn1_32xlarge_takes_1_4_8_or_16_devices(cores: int, ok: bool) -> None:
    if ok:
        assert size_pod("trn1.32xlarge", cores, 1, "neuroncore").units == cores
    else:
        with pytest.raises(ConfigError, match=r"only 1, 4, 8, 16 devices per pod.*2, 8, 16, 32 cores"):
            size_pod("trn1.32xlarge", cores, 1, "neuroncore")
