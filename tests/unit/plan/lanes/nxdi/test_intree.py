"""Choosing between the vllm-neuron plugin and vLLM's in-tree Neuron support (plan/lanes/nxdi/intree.py),
each way refused or planned, and transformers-neuronx's KV rules, table by table (added where mutation
testing showed no test reached them: docs/TESTING.md).
"""

from __future__ import annotations

import pytest
from tests.support.builders import (
    LLAMA_ENV,
    llama_facts,
    plan,
    refusal,
    resolution,
)

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.plan.facts import HostFacts
from neuronserve.plan.lanes.nxdi.intree import choose_integration, tnx_kv

FRAMEWORK_WARNING = (
    "VLLM_NEURON_FRAMEWORK={fw} is read only by vLLM's in-tree Neuron support (0.9/0.10); the vllm-neuron "
    "plugin ignores it (set NEURONSERVE_INTEGRATION=in-tree)"
)


@pytest.mark.parametrize(
    ("env", "versions", "want"),
    [
        ({}, {"vllm": "0.11.0", "vllm-neuron": "0.2.2+lts"}, ("plugin", None)),
        ({}, {"vllm": "0.10.2", "vllm-neuron": "0.1.0"}, ("plugin", None)),  # the plugin wins when installed
        ({}, {"vllm": "0.10.2"}, ("in-tree", "neuronx-distributed-inference")),
        ({}, {"vllm": "0.9.1"}, ("in-tree", "neuronx-distributed-inference")),
        ({}, {"vllm": "0.11.0"}, ("plugin", None)),
        ({}, {"vllm": "0.12.1"}, ("plugin", None)),
        ({}, {"vllm": "1.10.0"}, ("plugin", None)),
        ({}, {"vllm": "dev"}, ("plugin", None)),  # unreadable: never guessed to be old
        ({}, {}, ("plugin", None)),
        (
            {"VLLM_NEURON_FRAMEWORK": "transformers-neuronx"},
            {"vllm": "0.10.2"},
            ("in-tree", "transformers-neuronx"),
        ),
        ({"VLLM_NEURON_FRAMEWORK": "optimum-neuron"}, {"vllm": "0.9.2"}, ("in-tree", "optimum-neuron")),
        (
            {"NEURONSERVE_INTEGRATION": "in-tree"},
            {"vllm": "0.10.2", "vllm-neuron": "0.2.2+lts"},
            ("in-tree", "neuronx-distributed-inference"),
        ),
        ({"NEURONSERVE_INTEGRATION": "plugin"}, {"vllm": "0.10.2"}, ("plugin", None)),
    ],
)
def test_integration_choice(
    env: dict[str, str], versions: dict[str, str], want: tuple[str, str | None]
) -> None:
    warnings: list[str] = []
    got = choose_integration(
        parse_settings({"SM_VLLM_MODEL": "m", **env}),
        HostFacts(versions=versions),
        resolution(warnings=warnings),
    )
    assert got == want
    assert warnings == []


def test_a_framework_setting_the_plugin_ignores_is_named_and_dropped() -> None:
    warnings: list[str] = []
    env = {"SM_VLLM_MODEL": "m", "VLLM_NEURON_FRAMEWORK": "neuronx-distributed-inference"}
    got = choose_integration(
        parse_settings(env), HostFacts(versions={"vllm-neuron": "0.2.2+lts"}), resolution(warnings=warnings)
    )
    assert got == ("plugin", None)
    assert warnings == [FRAMEWORK_WARNING.format(fw="neuronx-distributed-inference")]


ORIGINS = {
    "block-size": "SM_VLLM_BLOCK_SIZE",
    "max-model-len": "SM_VLLM_MAX_MODEL_LEN",
    "enable-prefix-caching": "SM_VLLM_ENABLE_PREFIX_CACHING",
}


@pytest.mark.parametrize("block", [None, 2048])
def test_tnx_keeps_one_block_per_sequence(block: int | None) -> None:
    flags, kv = tnx_kv(parse_settings({"SM_VLLM_MODEL": "m"}), block, 2048, resolution(ORIGINS))
    assert flags == ["--no-enable-prefix-caching", "--block-size", "2048"]
    assert kv == {"mode": "contiguous", "block_size": 2048}


def test_tnx_refuses_a_block_size_other_than_the_length() -> None:
    with pytest.raises(ConfigError) as err:
        tnx_kv(parse_settings({"SM_VLLM_MODEL": "m"}), 32, 2048, resolution(ORIGINS))
    assert str(err.value) == (
        "SM_VLLM_BLOCK_SIZE=32: transformers-neuronx needs block_size == max_model_len: "
        "set SM_VLLM_BLOCK_SIZE=2048 or unset it"
    )
    assert err.value.variables == ("SM_VLLM_BLOCK_SIZE", "SM_VLLM_MAX_MODEL_LEN")


def test_tnx_refuses_prefix_caching() -> None:
    settings = parse_settings({"SM_VLLM_MODEL": "m", "SM_VLLM_ENABLE_PREFIX_CACHING": "true"})
    with pytest.raises(ConfigError) as err:
        tnx_kv(settings, None, 2048, resolution(ORIGINS))
    assert str(err.value) == (
        "SM_VLLM_ENABLE_PREFIX_CACHING: transformers-neuronx has no prefix caching: "
        "unset SM_VLLM_ENABLE_PREFIX_CACHING"
    )
    assert err.value.variables == ("SM_VLLM_ENABLE_PREFIX_CACHING",)
    off = parse_settings({"SM_VLLM_MODEL": "m", "SM_VLLM_ENABLE_PREFIX_CACHING": "false"})
    assert tnx_kv(off, None, 2048, resolution(ORIGINS))[1]["mode"] == "contiguous"


def test_tnx_buckets_come_from_the_override_else_the_environment() -> None:
    from neuronserve.plan.lanes.nxdi.intree import tnx_env

    env = {
        "SM_VLLM_MODEL": "m",
        "NEURON_CONTEXT_LENGTH_BUCKETS": "128,512",
        "NEURON_TOKEN_GEN_BUCKETS": "512",
    }
    settings = parse_settings(env)
    assert tnx_env(settings, {}) == {
        "NEURON_CONTEXT_LENGTH_BUCKETS": "128,512",
        "NEURON_TOKEN_GEN_BUCKETS": "512",
    }
    assert tnx_env(settings, {"token_generation_buckets": [256, 1024]}) == {
        "NEURON_CONTEXT_LENGTH_BUCKETS": "128,512",
        "NEURON_TOKEN_GEN_BUCKETS": "256,1024",
    }
    assert tnx_env(parse_settings({"SM_VLLM_MODEL": "m"}), {}) == {}


# --- in-tree integration needs vLLM's Neuron device --------------------------------------------------

IN_TREE = {**LLAMA_ENV, "NEURONSERVE_INTEGRATION": "in-tree"}


@pytest.mark.parametrize(
    ("versions", "installed"),
    [
        ({"vllm": "0.11.0"}, "0.11.0"),
        ({"vllm": "0.12.1"}, "0.12.1"),
        ({}, "0.11.0 (not detected: the image's)"),
    ],
)
def test_in_tree_is_refused_on_a_vllm_without_a_neuron_device(
    versions: dict[str, str], installed: str
) -> None:
    err = refusal(IN_TREE, llama_facts(versions=versions))
    assert str(err) == (
        "NEURONSERVE_INTEGRATION=in-tree needs vLLM's in-tree Neuron device (vLLM 0.9/0.10), but the "
        f"installed vLLM is {installed}, which has no `--device neuron`: unset it and serve with the "
        "vllm-neuron plugin (the image's 0.2.2+lts), or use an image with vLLM 0.10"
    )
    assert err.variables == ("NEURONSERVE_INTEGRATION",)


def test_a_framework_that_chose_in_tree_is_named() -> None:
    env = {**LLAMA_ENV, "VLLM_NEURON_FRAMEWORK": "transformers-neuronx", "SM_VLLM_BLOCK_SIZE": "2048"}
    err = refusal(env, llama_facts(versions={"vllm": "0.11.0"}))
    assert err.variables == ("VLLM_NEURON_FRAMEWORK",)
    assert str(err).startswith(
        "VLLM_NEURON_FRAMEWORK=transformers-neuronx needs vLLM's in-tree Neuron device"
    )
    assert (
        plan(env, llama_facts(versions={"vllm": "0.10.2"})).env["VLLM_NEURON_FRAMEWORK"]
        == "transformers-neuronx"
    )


def test_in_tree_plans_on_vllm_0_10() -> None:
    p = plan(IN_TREE, llama_facts(versions={"vllm": "0.10.2"}))
    assert p.integration == "in-tree" and p.argv[p.argv.index("--device") + 1] == "neuron"
