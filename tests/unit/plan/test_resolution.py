"""The Resolution the rules share: a warning said once in the order first said, the origin of a setting
(or the default variable of an override key nobody set), and the speculative config parsed once."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import HUB_MODEL, plan, raised, resolution

from neuronserve.config.settings import parse_settings
from neuronserve.plan.resolution import Resolution, Speculation, count


def test_a_warning_is_recorded_once_in_the_order_first_said() -> None:
    res = resolution()
    for text in ("b", "a", "b", "c", "a"):
        res.warn(text)
    assert res.warnings == ["b", "a", "c"]


def test_an_origin_is_the_variable_that_set_it_else_the_keys_own() -> None:
    res = resolution({"tp_degree": "SM_NEURON_OVERRIDE_CONFIG"})
    assert res.origin("tp_degree") == "SM_NEURON_OVERRIDE_CONFIG"
    assert res.origin("pa_num_blocks") == "SM_NEURON_PA_NUM_BLOCKS"
    assert res.origin("max_context_length", "X") == "X"


def test_of_settings_names_each_source_and_keeps_the_override() -> None:
    settings = parse_settings(
        {
            **HUB_MODEL,
            "OPTION_DTYPE": "bf16",
            "SM_NEURON_SEQUENCE_PARALLEL_ENABLED": "true",
            "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "64",
        }
    )
    res = Resolution.of(settings)
    assert res.origins["dtype"] == "OPTION_DTYPE"
    assert res.origins["max-model-len"] == "SM_VLLM_MAX_MODEL_LEN"
    assert res.origins["block-size"] == "SM_VLLM_BLOCK_SIZE"  # unset: the variable to set
    assert res.origins["sequence_parallel_enabled"] == "SM_NEURON_SEQUENCE_PARALLEL_ENABLED"
    assert res.origins["num-gpu-blocks-given"] == "yes"
    assert res.override == {"sequence_parallel_enabled": True}
    assert res.warnings == list(dict.fromkeys(settings.warnings))


def test_a_block_count_set_false_is_not_given() -> None:
    res = Resolution.of(parse_settings({**HUB_MODEL, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "false"}))
    assert "num-gpu-blocks-given" not in res.origins


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (None, Speculation()),
        (True, Speculation()),
        ("{not json", Speculation("{not json", None, invalid=True)),
        ('["eagle"]', Speculation('["eagle"]', None)),
        (
            '{"method": "eagle", "model": "/d"}',
            Speculation('{"method": "eagle", "model": "/d"}', {"method": "eagle", "model": "/d"}),
        ),
    ],
)
def test_the_speculative_config_is_parsed_once(value: Any, want: Speculation) -> None:
    assert Speculation.parse(value) == want


def test_a_speculation_names_its_method_and_draft() -> None:
    spec = Speculation.parse('{"method": "EAGLE", "model": "/d", "num_speculative_tokens": 3}')
    assert (spec.method, spec.draft) == ("EAGLE", "/d")
    assert (Speculation.parse('{"model": ""}').draft, Speculation().method) == (None, "")


def test_the_plan_says_a_repeated_warning_once() -> None:
    """Two sources saying the same thing (here `-- --host` twice) give one warning in the plan."""
    p = plan(HUB_MODEL, extra=("--host", "a", "--host", "b"), device="cpu")
    host = [w for w in p.warnings if w.startswith("-- --host")]
    assert len(host) == 1


@pytest.mark.parametrize(
    ("given", "least", "value"), [(None, 0, None), ("false", 0, None), ("8", 0, 8), ("0", 0, 0), ("1", 1, 1)]
)
def test_count_reads_a_whole_number_or_nothing(given: str | None, least: int, value: int | None) -> None:
    env = {**HUB_MODEL} | ({"SM_VLLM_MAX_LORAS": given} if given is not None else {})
    assert count(parse_settings(env), "max-loras", least) == value


@pytest.mark.parametrize(
    ("given", "least"), [("0", 1), ("-1", 0), ("2.5", 0), ("1e3", 0), ("1_0", 0), ("x", 0)]
)
def test_count_refuses_anything_else_naming_the_variable(given: str, least: int) -> None:
    err = raised(count, parse_settings({**HUB_MODEL, "SM_VLLM_MAX_LORAS": given}), "max-loras", least)
    assert str(err).startswith("SM_VLLM_MAX_LORAS=") and str(err).endswith(" must be a positive integer")
    assert given in str(err) and err.variables == ("SM_VLLM_MAX_LORAS",)
