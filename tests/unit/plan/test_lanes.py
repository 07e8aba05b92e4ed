"""Stack lanes: which lane plans, what it reports, which instances it refuses, and its cache key."""

from __future__ import annotations

import pytest
from tests.support.builders import HUB_MODEL, facts, plan, refusal

from neuronserve.plan import lanes
from neuronserve.plan.facts import HostFacts

NO_PLUGIN = {"vllm": None, "vllm-neuron": None}


def laptop(**kw: object) -> HostFacts:
    """A host without the plugin (a laptop planning for an image)."""
    return facts(versions=dict(NO_PLUGIN), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("version", "lane"),
    [("0.2.2+lts", "2.27"), ("0.2.0", "2.27"), ("0.4.1", "2.28"), ("0.24.0.1.1.0", "2.32"), (None, "2.27")],
)
def test_the_installed_plugin_chooses_the_lane(version: str | None, lane: str) -> None:
    chosen = lanes.choose_lane(None, facts(versions={"vllm-neuron": version}))
    assert chosen is lanes.LANES[lane]


def test_neuronserve_stack_chooses_the_lane_on_a_laptop() -> None:
    p = plan({**HUB_MODEL, "NEURONSERVE_STACK": "2.28"}, laptop())
    assert p.stack == {"lane": "2.28", "sdk": "2.28", "vllm_neuron": "0.4.1", "vllm": "0.13.0"}


def test_a_stack_that_disagrees_with_the_plugin_is_refused_naming_both() -> None:
    err = refusal({**HUB_MODEL, "NEURONSERVE_STACK": "2.28"})
    assert "NEURONSERVE_STACK=2.28" in str(err) and "vllm-neuron 0.2.2+lts (lane 2.27)" in str(err)
    assert err.variables == ("NEURONSERVE_STACK",)


def test_an_unknown_stack_is_refused_listing_the_lanes() -> None:
    err = refusal({**HUB_MODEL, "NEURONSERVE_STACK": "2.30"}, laptop())
    assert "NEURONSERVE_STACK" in str(err)
    assert all(lane in str(err) for lane in ("2.27", "2.28", "2.32"))


def test_an_unknown_installed_plugin_is_refused() -> None:
    err = refusal(HUB_MODEL, facts(versions={"vllm-neuron": "0.9.0"}))
    assert "vllm-neuron 0.9.0" in str(err) and "2.28 (vllm-neuron 0.4.1)" in str(err)


@pytest.mark.parametrize("instance", ["inf2.xlarge", "ml.trn1.32xlarge", "trn1n.32xlarge"])
def test_lane_2_32_refuses_inf2_and_trn1_pointing_to_2_28(instance: str) -> None:
    err = refusal({**HUB_MODEL, "NEURONSERVE_STACK": "2.32", "NEURONSERVE_INSTANCE_TYPE": instance}, laptop())
    text = str(err)
    assert f"NEURONSERVE_INSTANCE_TYPE={instance}" in text and "lane 2.32" in text
    assert "use lane 2.28" in text and "NEURONSERVE_STACK=2.28" in text


def test_lane_2_32_refuses_detected_neuroncore_v2_devices() -> None:
    err = refusal({**HUB_MODEL, "NEURONSERVE_STACK": "2.32"}, laptop(neuron_devices=1, physical_cores=2))
    assert "detected devices" in str(err) and "use lane 2.28" in str(err)


def test_lanes_2_27_and_2_28_run_every_instance_family() -> None:
    for stack in ("2.27", "2.28"):
        for instance in ("inf2.48xlarge", "trn1.32xlarge", "trn2.48xlarge"):
            env = {**HUB_MODEL, "NEURONSERVE_STACK": stack, "NEURONSERVE_INSTANCE_TYPE": instance}
            assert plan(env, laptop(visible_cores=2)).stack["lane"] == stack


def test_the_cache_key_covers_the_lane_and_keeps_2_27_keys() -> None:
    default = plan(HUB_MODEL, laptop())
    named = plan({**HUB_MODEL, "NEURONSERVE_STACK": "2.27"}, laptop())
    other = plan({**HUB_MODEL, "NEURONSERVE_STACK": "2.28"}, laptop())
    assert default.cache_key == named.cache_key
    assert other.cache_key not in (None, default.cache_key)
