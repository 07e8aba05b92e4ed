"""The NxD Inference plugin profiles (plan/lanes/nxdi/profiles.py): what 0.4.1 does unlike 0.2.2+lts as
data, the plugin version comparison the rules use, and the EAGLE3 warning only 0.4.1's lane says."""

from __future__ import annotations

import pytest

from neuronserve.plan.lanes.nxdi.profiles import V0_2, V0_4, plugin_at_least


@pytest.mark.parametrize(
    ("version", "floor", "ok"),
    [
        (None, (0, 2, 2), True),  # unknown: the image's 0.2.2+lts
        ("", (0, 2, 2), True),
        ("0.2.2+lts", (0, 2, 2), True),
        ("0.2.2", (0, 2, 2), True),
        ("0.2.1", (0, 2, 2), False),
        ("0.2.0", (0, 2, 2), False),
        ("0.4.1", (0, 2, 2), True),
        ("0.10.0", (0, 4), True),  # numbers, not text: 10 > 4
        ("0.2.2rc1", (0, 2, 2), True),  # the digits of a piece
        ("0.2", (0, 2, 2), False),  # no patch number: below 0.2.2
        ("0.\u00b2.2", (0, 2, 2), False),  # "²" is a digit to isdigit, not a decimal
    ],
)
def test_plugin_at_least(version: str | None, floor: tuple[int, ...], ok: bool) -> None:
    assert plugin_at_least(version, floor) is ok


def test_0_4_1_loads_all_0_2_2_loads_and_more() -> None:
    assert set(V0_2.architectures) < set(V0_4.architectures)
    assert set(V0_2.model_types) < set(V0_4.model_types)
    assert {"GptOssForCausalLM", "Qwen2VLForConditionalGeneration"} <= set(V0_4.architectures) - set(
        V0_2.architectures
    )
    assert (V0_2.pixtral_max_seqs, V0_4.pixtral_max_seqs) == (4, None)
    assert (V0_2.adapters_at_start, V0_4.adapters_at_start) == (True, False)
    assert (V0_2.structured_outputs_on_cpu, V0_4.structured_outputs_on_cpu) == (False, True)


def test_both_plugins_run_eagle_only_and_0_4_1_builds_the_draft_s_own_class() -> None:
    assert V0_2.speculative_methods == V0_4.speculative_methods == ("eagle",)
    assert (V0_2.draft_own_class, V0_4.draft_own_class) == (False, True)
