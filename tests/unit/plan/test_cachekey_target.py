"""The cache key by NeuronCore generation, compiler target and logical core size (cachekey.neuron_target).

Measured: the same configuration planned on inf2, trn1 and trn2 facts gave one key before; now inf2 and
trn1 (both NeuronCore-v2, distinct neuronx-cc targets) and trn2 (NeuronCore-v3) give three, and trn2 at
LNC 1 a fourth."""

from __future__ import annotations

import pytest
from tests.support.builders import facts, plan

from neuronserve.plan.cachekey import neuron_target

HUB = {
    "SM_VLLM_MODEL": "org/m",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    "SM_VLLM_MAX_MODEL_LEN": "128",
    "SM_VLLM_MAX_NUM_SEQS": "4",
}


def key(instance: str | None, **env: str) -> str | None:
    values = {**HUB, **env}
    if instance:
        values["NEURONSERVE_INSTANCE_TYPE"] = instance
    return plan(values, facts(2)).cache_key


def test_inf2_trn1_and_trn2_get_different_keys() -> None:
    keys = {name: key(name) for name in ("inf2.xlarge", "trn1.2xlarge", "trn2.3xlarge")}
    assert len(set(keys.values())) == 3
    assert key("trn2.3xlarge", NEURON_LOGICAL_NC_CONFIG="1") not in keys.values()


def test_sizes_of_one_family_share_a_key() -> None:
    """The key follows the hardware generation and target, not the instance size (TP is in the graph)."""
    assert key("inf2.xlarge") == key("ml.inf2.8xlarge") == key("inf2.48xlarge")
    assert key("trn2.48xlarge") == key("trn2u.48xlarge")


@pytest.mark.parametrize(
    ("instance", "lnc", "want"),
    [
        ("inf2.xlarge", None, {"generation": "NeuronCore-v2", "target": "inf2", "logical_nc_config": 1}),
        ("ml.trn1.32xlarge", None, {"generation": "NeuronCore-v2", "target": "trn1", "logical_nc_config": 1}),
        ("trn1n.32xlarge", None, {"generation": "NeuronCore-v2", "target": "trn1n", "logical_nc_config": 1}),
        ("trn2.3xlarge", None, {"generation": "NeuronCore-v3", "target": "trn2", "logical_nc_config": 2}),
        ("trn2.3xlarge", "1", {"generation": "NeuronCore-v3", "target": "trn2", "logical_nc_config": 1}),
        ("trn3.48xlarge", None, {"generation": None, "target": "trn3", "logical_nc_config": None}),
    ],
)
def test_the_target_of_a_declared_instance(instance: str, lnc: str | None, want: dict[str, object]) -> None:
    assert neuron_target(instance, facts(2), lnc) == want


def test_detected_devices_tell_generations_apart_but_not_inf2_from_trn1() -> None:
    v2 = facts(24, neuron_devices=12, physical_cores=24)
    v3 = facts(64, neuron_devices=16, physical_cores=128)
    assert neuron_target(None, v2, None) == {
        "generation": "NeuronCore-v2",
        "target": "inf2|trn1",
        "logical_nc_config": 1,
    }
    assert neuron_target(None, v3, None) == {
        "generation": "NeuronCore-v3",
        "target": "trn2",
        "logical_nc_config": 2,
    }
    assert neuron_target(None, facts(2), None) == {
        "generation": None,
        "target": None,
        "logical_nc_config": None,
    }
    assert plan(HUB, facts(2, physical_cores=2)).cache_key != plan(HUB, facts(2, physical_cores=8)).cache_key
