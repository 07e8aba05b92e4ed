"""The shapes the plan is given and the two grammars plan/facts.py holds: a whole number as JSON has it
(json_int) and the Neuron runtime's core list (parse_core_list), each both ways."""

from __future__ import annotations

import pytest
from tests.support.builders import raised

from neuronserve.plan.facts import API_SERVER_MODULE, HostFacts, json_int, parse_core_list


@pytest.mark.parametrize("value", [0, 1, -3, 2**40])
def test_json_int_takes_every_int(value: int) -> None:
    assert json_int(value)


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None, [1], {"n": 1}])
def test_json_int_refuses_booleans_floats_and_text(value: object) -> None:
    assert not json_int(value)


@pytest.mark.parametrize(
    ("spec", "cores"),
    [("0", [0]), ("0-3", [0, 1, 2, 3]), ("4-7,9", [4, 5, 6, 7, 9]), (" 0 , 2 ", [0, 2]), ("3-3", [3])],
)
def test_a_core_list_is_read_as_the_runtime_reads_it(spec: str, cores: list[int]) -> None:
    assert parse_core_list(spec) == cores


@pytest.mark.parametrize("spec", ["", "0,", "a", "0-", "-1", "3-1", "0,0", "0-2,1", "1_0", "\u0663", "1.5"])
def test_a_malformed_core_list_is_refused_naming_its_variable(spec: str) -> None:
    err = raised(parse_core_list, spec)
    assert str(err) == f"NEURON_RT_VISIBLE_CORES={spec!r} is not a core list like 0-3 or 0,1"
    assert err.variables == ("NEURON_RT_VISIBLE_CORES",)


def test_the_variable_named_is_the_callers() -> None:
    assert raised(parse_core_list, "x", "NEURONSERVE_CORES").variables == ("NEURONSERVE_CORES",)


def test_a_host_without_facts_plans_vllms_own_server_with_nothing_visible() -> None:
    host = HostFacts()
    assert host.vllm_module == API_SERVER_MODULE == "vllm.entrypoints.openai.api_server"
    assert (host.neuron_devices, host.visible_cores, host.paths, host.cpus) == (0, None, {}, ())
