"""A lane is one registry entry (plan/lanes/lane.py, plan/lanes/registry.py): a made-up lane, added to the
registry by a fixture and removed after it, is chosen from its installed plugin, refuses the instances it
does not run, and plans through its own renderer (`lane.engine`), with no other module touched. A new
version of the NxD Inference plugin is the same entry with the shared renderer and its own profile."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from tests.support.builders import HUB_MODEL, facts, plan, refusal

from neuronserve.config.settings import Settings
from neuronserve.lane_ids import LANE_IDS
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.lanes.lane import Lane, NeuronEngine
from neuronserve.plan.lanes.nxdi import engine as nxdi
from neuronserve.plan.lanes.nxdi.profiles import V0_4
from neuronserve.plan.lanes.registry import LANES
from neuronserve.plan.resolution import Resolution
from neuronserve.types import Integration, RequestSupport

CALLS: list[dict[str, Any]] = []


def made_up_engine(
    settings: Settings,
    facts: HostFacts,
    model_uri: str,
    model: ModelFacts | None,
    res: Resolution,
    *,
    lane: Lane,
) -> NeuronEngine:
    """A renderer of a lane no build has: it records its call and renders what the test looks for."""
    CALLS.append({"model_uri": model_uri, "lane": lane.lane, "tp": settings.get("tensor-parallel-size")})
    res.warn(f"rendered by lane {lane.lane}")
    return NeuronEngine(
        ["--tensor-parallel-size", "1", "--made-up", lane.vllm_neuron],
        {"made_up": lane.lane},
        {"MADE_UP_LANE": lane.lane},
        Integration.NATIVE,
        {"tp": 1, "made_up": lane.lane},
        RequestSupport(logprobs=False, why={"logprobs": f"lane {lane.lane} cannot"}),
        artifacts_subdir="made/up",
    )


MADE_UP = Lane(
    "9.99",
    "9.99.0",
    "9.9.0",
    "0.99.0",
    "made-up",
    ("trn2",),
    ("9.9",),
    "vllm-0.24.0-cli.json",
    engine=made_up_engine,
)


@pytest.fixture
def made_up() -> Iterator[Lane]:
    """MADE_UP in the registry for one test, and out of it after, whatever the test did."""
    LANES[MADE_UP.lane] = MADE_UP
    CALLS.clear()
    try:
        yield MADE_UP
    finally:
        del LANES[MADE_UP.lane]


def on_made_up_plugin(**kw: Any) -> HostFacts:
    return facts(versions={"vllm": "0.99.0", "vllm-neuron": "9.9.3"}, **kw)


def test_a_registered_lane_plans_through_its_own_renderer(made_up: Lane) -> None:
    p = plan(HUB_MODEL, on_made_up_plugin())
    assert [{"model_uri": HUB_MODEL["SM_VLLM_MODEL"], "lane": "9.99", "tp": "2"}] == CALLS
    assert p.stack == {"lane": "9.99", "sdk": "9.99.0", "vllm_neuron": "9.9.0", "vllm": "0.99.0"}
    argv = list(p.argv)
    assert argv[argv.index("--made-up") + 1] == "9.9.0"
    assert argv.count("--tensor-parallel-size") == 1  # the lane renders it; the user's is not passed twice
    assert p.env["MADE_UP_LANE"] == "9.99"
    assert p.integration == Integration.NATIVE and p.neuron_override == {"made_up": "9.99"}
    assert "rendered by lane 9.99" in p.warnings
    assert p.request_support.why["logprobs"] == "lane 9.99 cannot" and not p.request_support.logprobs
    assert p.artifacts.local_dir is not None and p.artifacts.local_dir.endswith("/made/up")


def test_the_cache_key_names_the_registered_lane(made_up: Lane) -> None:
    first = plan(HUB_MODEL, on_made_up_plugin()).cache_key
    LANES["9.98"] = replace(MADE_UP, lane="9.98", plugin_series=("9.8",))
    try:
        other = plan(HUB_MODEL, facts(versions={"vllm": "0.99.0", "vllm-neuron": "9.8.0"})).cache_key
    finally:
        del LANES["9.98"]
    assert first and other and first != other  # the same graph and versions, another lane: another key


def test_a_registered_lane_refuses_the_instances_it_does_not_run(made_up: Lane) -> None:
    err = refusal({**HUB_MODEL, "NEURONSERVE_INSTANCE_TYPE": "inf2.xlarge"}, on_made_up_plugin())
    assert str(err) == (
        "NEURONSERVE_INSTANCE_TYPE=inf2.xlarge: lane 9.99 (vllm-neuron 9.9.0) runs on trn2 only, not inf2: "
        "use lane 2.28 (NEURONSERVE_STACK=2.28, the lane 2.28 image) for this instance"
    )
    assert CALLS == []  # refused before the renderer ran


def test_a_registered_lane_is_named_when_an_unknown_plugin_is_refused(made_up: Lane) -> None:
    err = refusal(HUB_MODEL, facts(versions={"vllm": "0.99.0", "vllm-neuron": "7.0.0"}))
    assert "9.99 (vllm-neuron 9.9.0)" in str(err)


def test_without_the_fixture_the_made_up_lane_is_gone() -> None:
    assert tuple(LANES) == LANE_IDS
    err = refusal(HUB_MODEL, on_made_up_plugin())
    assert str(err).startswith("the installed vllm-neuron 9.9.3 is no lane's plugin")


@pytest.fixture
def nxdi_version() -> Iterator[Lane]:
    """A next NxD Inference plugin: the shared renderer and a profile of its own (2.28's, renamed)."""
    lane = Lane(
        "9.98",
        "9.98.0",
        "0.9.8",
        "0.13.0",
        "nxdi",
        ("inf2", "trn1", "trn2"),
        ("0.9",),
        "vllm-0.13.0-cli.json",
        engine=nxdi.neuron_engine,
        rules=replace(V0_4, plugin="vllm-neuron 0.9.8"),
    )
    LANES[lane.lane] = lane
    try:
        yield lane
    finally:
        del LANES[lane.lane]


def test_a_next_nxd_inference_version_plans_with_its_own_profile(nxdi_version: Lane) -> None:
    p = plan(HUB_MODEL, facts(versions={"vllm": "0.13.0", "vllm-neuron": "0.9.8"}))
    assert p.stack["lane"] == "9.98" and p.integration == Integration.PLUGIN
    assert "--additional-config" in p.argv
    why = p.request_support.why
    assert "vllm-neuron 0.9.8 samples on the device" in why["logprobs"]
    assert why["prompt_logprobs"].startswith("vllm-neuron 0.9.8 cannot")


def test_an_engine_without_its_own_cache_environment_points_the_plugin_at_the_directory() -> None:
    engine = NeuronEngine([], {}, {}, Integration.PLUGIN, {}, RequestSupport())
    assert engine.artifacts_env("/w/artifacts/k") == {"NEURON_COMPILED_ARTIFACTS": "/w/artifacts/k"}
    own = replace(engine, cache_env=lambda d: {"VLLM_CACHE_ROOT": d + "/root"})
    assert own.artifacts_env("/w/artifacts/k") == {"VLLM_CACHE_ROOT": "/w/artifacts/k/root"}


def test_stack_json_is_the_four_pins_only() -> None:
    assert MADE_UP.stack_json() == {"lane": "9.99", "sdk": "9.99.0", "vllm_neuron": "9.9.0", "vllm": "0.99.0"}
