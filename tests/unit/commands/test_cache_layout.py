"""`cache push` knows which lanes key the whole VLLM_CACHE_ROOT (commands/cache.py keeps its own table to
stay stdlib-only at import): it must be the registry's, lane for lane."""

from __future__ import annotations

import neuronserve.plan.lanes.registry as lanes
from neuronserve.commands import cache as cache_cmd


def test_the_whole_root_lanes_are_the_registrys() -> None:
    expected = {
        lane.lane: lane.plugin_series[0]
        for lane in lanes.LANES.values()
        if lane.native is not None and lane.native.keyed_subdir == ""
    }
    assert cache_cmd.WHOLE_ROOT_LANES == expected == {"2.33": "0.29"}


def test_the_lane_comes_from_the_plan_or_stack_else_the_installed_plugin() -> None:
    assert cache_cmd._lane_keys_the_root("2.33", None)
    assert not cache_cmd._lane_keys_the_root("2.32", "0.29.0.1.2.0")  # the lane named wins
    assert cache_cmd._lane_keys_the_root(None, "0.29.0.1.2.0")
    assert not cache_cmd._lane_keys_the_root(None, "0.24.0.1.1.0")
    assert not cache_cmd._lane_keys_the_root(None, None)
