"""The one on_device_sampling_config check both lane generations share (plan/lanes/sampling.py), called
directly, then through each lane's plan: the same refusal of a value that is no object, each lane's own
words for an unknown key."""

from __future__ import annotations

import pytest
from tests.support.builders import HUB_MODEL, facts, raised, refusal

from neuronserve.plan.lanes.sampling import sampling_config

KEYS = frozenset({"top_k", "temperature"})


def why(keys: str, allowed: str) -> str:
    return f"[{keys}] not in [{allowed}]"


def test_an_object_of_known_keys_is_returned_as_given() -> None:
    value = {"top_k": 5}
    assert sampling_config(value, "V", KEYS, why) is value
    assert sampling_config({}, "V", KEYS, why) == {}


@pytest.mark.parametrize("value", [[], "greedy", 1, True])
def test_a_value_that_is_no_object_is_refused(value: object) -> None:
    err = raised(sampling_config, value, "V", KEYS, why)
    assert str(err) == "V must be a JSON object or null" and err.variables == ("V",)


def test_unknown_keys_are_refused_sorted_with_the_lanes_words() -> None:
    err = raised(sampling_config, {"z": 1, "top_k": 1, "a": 2}, "V", KEYS, why)
    assert str(err) == "V: [a, z] not in [temperature, top_k]" and err.variables == ("V",)


SAMPLING = "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG"
LAPTOP_2_32 = {**HUB_MODEL, "NEURONSERVE_STACK": "2.32"}


@pytest.mark.parametrize(
    ("env", "versions"),
    [(HUB_MODEL, None), (LAPTOP_2_32, {"vllm": None, "vllm-neuron": None})],
    ids=["nxdi", "native"],
)
def test_both_generations_refuse_a_list_alike(env: dict[str, str], versions: dict[str, None] | None) -> None:
    f = facts(versions=versions) if versions else facts()
    err = refusal({**env, SAMPLING: "[1]"}, f)
    assert str(err) == f"{SAMPLING} must be a JSON object or null"


def test_each_generation_says_an_unknown_key_in_its_own_words() -> None:
    nxdi = refusal({**HUB_MODEL, SAMPLING: '{"beam": 2}'})
    assert str(nxdi).startswith(f"{SAMPLING}: unknown key(s) beam (NxD Inference drops them silently)")
    native = refusal(
        {**LAPTOP_2_32, SAMPLING: '{"beam": 2}'}, facts(versions={"vllm": None, "vllm-neuron": None})
    )
    assert str(native) == (
        f"{SAMPLING}: beam not in this lane (2.32): vllm-neuron 0.24's on_device_sampling_config takes "
        "all_greedy, temperature, top_k, top_p (reference-configuration.md:79)"
    )
