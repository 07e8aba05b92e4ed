"""plan/fit/instances.py cases that mutation testing showed unchecked: the exact
refusals (message and the variable they name) for an unknown instance type, an LNC on a chip without
logical cores, an LNC Trn2 does not accept and a declared type the host contradicts; the facts a live
host's devices give (name, chip label, source); and the instance document plans and `recommend` print."""

from __future__ import annotations

import json

import pytest

from neuronserve.errors import ConfigError
from neuronserve.plan.fit import instances

GIB = instances.GIB
KNOWN = (
    "inf2.xlarge, inf2.8xlarge, inf2.24xlarge, inf2.48xlarge, trn1.2xlarge, trn1.32xlarge, trn1n.32xlarge, "
    "trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge"
)


def test_the_instance_document_is_exact() -> None:
    """`as_json` is the "instance" object of a plan and of `neuronserve recommend`: its keys are read by
    people and tools, and the HBM per core is a whole number of bytes (an int in JSON, not 1.7e10)."""
    doc = instances.instance_facts("ml.inf2.48xlarge").as_json()
    assert doc == {
        "name": "inf2.48xlarge",
        "chip": "Inferentia2",
        "chips": 12,
        "neuron_cores": 24,
        "logical_nc_config": 1,
        "hbm_bytes_per_core": 16 * GIB,
        "hbm_bytes_per_s_per_core": 410e9,
        "source": "--instance-type",
    }
    assert '"hbm_bytes_per_core": 17179869184,' in json.dumps(doc)
    t2 = instances.instance_facts("trn2.3xlarge", lnc=2, origin="NEURONSERVE_INSTANCE_TYPE").as_json()
    assert (t2["chip"], t2["neuron_cores"], t2["logical_nc_config"], t2["source"]) == (
        "Trainium2",
        4,
        2,
        "NEURONSERVE_INSTANCE_TYPE",
    )
    assert json.dumps(t2["hbm_bytes_per_core"]) == str(24 * GIB)


def test_an_unknown_instance_type_is_refused_naming_the_known_ones() -> None:
    """The refusal lists every instance type the table knows, comma separated, and names the flag the
    value came from (`--instance-type` unless the caller says otherwise) as the variable to fix."""
    with pytest.raises(ConfigError) as err:
        instances.instance_facts("g5.xlarge")
    assert str(err.value) == (
        "--instance-type='g5.xlarge' is not a Neuron instance type: "
        f"use one of {KNOWN} (with or without `ml.`)"
    )
    assert err.value.variables == ("--instance-type",)
    with pytest.raises(ConfigError) as env_err:
        instances.instance_facts("ml.p4d.24xlarge", origin="NEURONSERVE_INSTANCE_TYPE")
    assert str(env_err.value).startswith("NEURONSERVE_INSTANCE_TYPE='ml.p4d.24xlarge' is not a Neuron")
    assert env_err.value.variables == ("NEURONSERVE_INSTANCE_TYPE",)


@pytest.mark.parametrize(("name", "chip"), [("inf2.xlarge", "Inferentia2"), ("trn1.32xlarge", "Trainium")])
def test_an_lnc_on_a_chip_without_logical_cores_is_refused(name: str, chip: str) -> None:
    """NEURON_LOGICAL_NC_CONFIG=2 on Inf2/Trn1: the refusal says where the instance type came from and
    names NEURON_LOGICAL_NC_CONFIG as the variable to unset; LNC 1 (the only one they have) is accepted."""
    with pytest.raises(ConfigError) as err:
        instances.instance_facts(name, lnc=2, origin="NEURONSERVE_INSTANCE_TYPE")
    assert str(err.value) == (
        f"NEURON_LOGICAL_NC_CONFIG=2 applies to Trn2 only; {chip} has no logical cores "
        "(NEURONSERVE_INSTANCE_TYPE): unset NEURON_LOGICAL_NC_CONFIG"
    )
    assert err.value.variables == ("NEURON_LOGICAL_NC_CONFIG",)
    assert instances.instance_facts(name, lnc=1).logical_nc_config == 1


def test_trn2_takes_lnc_1_or_2_and_refuses_others() -> None:
    """Trn2 with NEURON_LOGICAL_NC_CONFIG=2 set explicitly is its default (64 logical cores of 24 GiB on a
    trn2.48xlarge); 3 or 4 is refused with the accepted values, naming NEURON_LOGICAL_NC_CONFIG."""
    t2 = instances.instance_facts("trn2.48xlarge", lnc=2)
    assert (t2.cores, t2.logical_nc_config, t2.hbm_bytes_per_core) == (64, 2, 24 * GIB)
    for lnc in (3, 4):
        with pytest.raises(ConfigError) as err:
            instances.instance_facts("trn2.48xlarge", lnc=lnc)
        assert str(err.value) == f"NEURON_LOGICAL_NC_CONFIG={lnc}: Trn2 accepts 1 or 2"
        assert err.value.variables == ("NEURON_LOGICAL_NC_CONFIG",)


def test_neuron_cores_counts_logical_cores_at_the_default_lnc() -> None:
    """What deploy checks a TP degree against: logical cores, with or without the `ml.` prefix."""
    assert instances.neuron_cores("ml.trn2.48xlarge") == 64
    assert instances.neuron_cores("inf2.24xlarge") == 12


@pytest.mark.parametrize(
    ("devices", "cores", "chip", "lnc"),
    [(12, 24, "Inferentia2/Trainium", 1), (1, 8, "Trainium2", 2)],
)
def test_facts_of_a_live_host_name_what_was_detected(devices: int, cores: int, chip: str, lnc: int) -> None:
    """A host's devices cannot tell Inf2 from Trn1 (same cores, HBM and bandwidth), so the facts say
    "Inferentia2/Trainium"; Trainium2 is named as such. The source is "detected devices", which messages
    quote when the facts are contradicted."""
    facts = instances.facts_for_host(devices, cores, None)
    assert facts is not None
    assert facts.as_json() == {
        "name": f"detected: {devices} x {chip}",
        "chip": chip,
        "chips": devices,
        "neuron_cores": cores // lnc,
        "logical_nc_config": lnc,
        "hbm_bytes_per_core": 16 * GIB if lnc == 1 else 24 * GIB,
        "hbm_bytes_per_s_per_core": 410e9 if lnc == 1 else 725e9,
        "source": "detected devices",
    }


def test_an_lnc_on_a_detected_inferentia_host_names_the_detected_devices() -> None:
    """NEURON_LOGICAL_NC_CONFIG=2 on a host whose devices are NeuronCore-v2: the refusal says the chip was
    detected from the devices (there is no instance type to blame)."""
    with pytest.raises(ConfigError) as err:
        instances.facts_for_host(1, 2, 2)
    assert str(err.value) == (
        "NEURON_LOGICAL_NC_CONFIG=2 applies to Trn2 only; Inferentia2 has no logical cores "
        "(detected devices): unset NEURON_LOGICAL_NC_CONFIG"
    )


def test_a_host_reporting_no_devices_gives_no_facts() -> None:
    """Zero devices with cores reported (a half-read sysfs) is "too little to say", not a crash."""
    assert instances.facts_for_host(0, 4, None) is None
    assert instances.facts_for_host(-1, 4, None) is None


def test_a_declared_type_the_devices_agree_with_is_accepted() -> None:
    """trn1.32xlarge declared on a host of 16 NeuronCore-v2 devices: same cores and HBM per core, so no
    refusal even though the detected label is "Inferentia2/Trainium"."""
    declared = instances.instance_facts("trn1.32xlarge", origin="NEURONSERVE_INSTANCE_TYPE")
    detected = instances.facts_for_host(16, 32, None)
    assert detected is not None
    instances.check_agreement(declared, detected)


def test_a_declared_type_the_devices_contradict_is_refused_with_both_sides() -> None:
    """The refusal shows the declared and the detected cores and GiB per core, and names the variable
    the declared type came from as the one to fix."""
    declared = instances.instance_facts("trn2.48xlarge", origin="NEURONSERVE_INSTANCE_TYPE")
    detected = instances.facts_for_host(12, 24, None)
    assert detected is not None
    with pytest.raises(ConfigError) as err:
        instances.check_agreement(declared, detected)
    assert str(err.value) == (
        "NEURONSERVE_INSTANCE_TYPE=trn2.48xlarge (64 NeuronCores of 24 GiB) disagrees with this host's "
        "devices (24 NeuronCores of 16 GiB): fix or unset NEURONSERVE_INSTANCE_TYPE"
    )
    assert err.value.variables == ("NEURONSERVE_INSTANCE_TYPE",)
