"""The model check (plan/lanes/nxdi/models.py): config.json architectures[0] against NxD Inference's model
registry, the installed one (HostFacts.nxdi_models) or, off the image, the lane's release's, said in a
warning and in `plan --json` "stack". The architecture refusals word for word, moved from test_rules.py."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import LLAMA_ENV, llama_facts, llama_plan, llama_refusal, plan, raised, resolution

from neuronserve.commands.plan import plan_document
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.lanes.nxdi import models
from neuronserve.plan.lanes.nxdi.profiles import PIXTRAL, V0_2, V0_4

# NxD Inference 0.7.14366's MODEL_TYPES (utils/constants.py:41-51): no pixtral.
NXDI_0_7 = ("dbrx", "gpt_oss", "llama", "llama4", "mixtral", "mllama", "qwen2", "qwen3", "qwen3_moe")
ARCHS = ", ".join(a for a in V0_2.architectures if a != PIXTRAL)  # what 0.7.14366 loads through 0.2.2+lts
PIXTRAL_CONFIG = {
    "model_type": "llava",
    "architectures": [PIXTRAL],
    "text_config": {"num_key_value_heads": 8, "head_dim": 128},
}
# An image whose NxD Inference has pixtral (as 2.28's does; 2.27.1's 0.7.15063 is not public).
WITH_PIXTRAL = {key: ("causal-lm",) for key in (*NXDI_0_7, "pixtral")}


def arch(config: dict[str, Any] | None, reg: models.Registry | None = None) -> list[str]:
    warnings: list[str] = []
    models.check_architecture(
        ModelFacts(kind="dir", config=config) if config is not None else None,
        "/m",
        resolution(warnings=warnings),
        reg=reg,
    )
    return warnings


def installed(types: dict[str, tuple[str, ...]], version: str = "0.7.15063") -> models.Registry:
    return models.registry(HostFacts(versions={"neuronx-distributed-inference": version}, nxdi_models=types))


def test_the_registry_is_the_installed_one_else_the_lanes() -> None:
    assert models.registry(HostFacts()).as_json() == {
        "version": "0.7.14366",
        "source": "assumed",
        "model_types": list(NXDI_0_7),
    }
    assert models.registry(HostFacts(), V0_4).as_json()["model_types"] == sorted(
        [*NXDI_0_7, "pixtral", "qwen2_vl", "qwen3_vl"]
    )
    assert installed({"llama": ("causal-lm",)}).as_json() == {
        "version": "0.7.15063",
        "source": "installed",
        "model_types": ["llama"],
    }
    assert models.registry(HostFacts(nxdi_models={})).version == "(version unknown)"


def test_architecture_unknown_without_a_config() -> None:
    assert arch(None) == [
        "architecture of /m not checked before staging (no local config.json); supported architectures: "
        f"{ARCHS}"
    ]


def test_a_supported_architecture_with_its_heads_passes() -> None:
    assert arch({"architectures": ["LlamaForCausalLM"], "num_key_value_heads": 8, "head_dim": 64}) == []
    assert arch({"architectures": ["LlamaForCausalLM"]}) == [
        "/m: config.json has no num_key_value_heads / head_dim (or hidden_size and num_attention_heads); the "
        "plugin reads them before compiling and raises without them"
    ]


def test_pixtral_needs_a_registry_with_pixtral() -> None:
    """NxD Inference 0.7.14366's MODEL_TYPES has no pixtral, so vllm-neuron 0.2.2+lts raises "Model
    LlavaForConditionalGeneration is not supported" (loader :657-666): off the image (the assumed
    0.7.14366) it is refused naming the model type and the version; an installed registry that has it
    plans, one that lacks it is refused naming the installed version."""
    err = raised(arch, {"architectures": [PIXTRAL]})
    assert str(err) == (
        f"/m: {PIXTRAL} is NxD Inference model type 'pixtral', which NxD Inference 0.7.14366 (assumed: none "
        f"read on this host) does not have (its MODEL_TYPES: {', '.join(NXDI_0_7)}): the plugin raises "
        f'"Model {PIXTRAL} is not supported" at load (worker/neuronx_distributed_model_loader.py:657-666); '
        f"use a supported architecture ({ARCHS}), or an image whose NxD Inference has 'pixtral'"
    )
    assert err.variables == ("SM_VLLM_MODEL",)
    assert arch({**PIXTRAL_CONFIG}, installed(WITH_PIXTRAL)) == []
    err = raised(arch, {"architectures": ["Qwen3ForCausalLM"]}, installed({"llama": ("causal-lm",)}))
    assert "which NxD Inference 0.7.15063 (installed here) does not have (its MODEL_TYPES: llama)" in str(err)
    assert "use a supported architecture (LlamaForCausalLM)" in str(err)


def test_llava_is_refused_before_0_2_2_and_planned_from_it() -> None:
    """Pixtral (LlavaForConditionalGeneration): 0.2.0 raises (loader.py:672-674), 0.2.2+lts builds it
    where NxD Inference has pixtral."""
    config = ModelFacts(kind="dir", config={"architectures": [PIXTRAL]})
    reg = installed(WITH_PIXTRAL)
    err = raised(models.check_architecture, config, "/m", resolution(), "0.2.0", reg=reg)
    assert (str(err), err.variables) == (
        f"/m: {PIXTRAL} (Pixtral/LLaVA) does not run on vllm-neuron 0.2.0 (0.2.2+lts runs Pixtral from a "
        f"{PIXTRAL} checkpoint); choose a supported architecture ({ARCHS}, {PIXTRAL})",
        ("SM_VLLM_MODEL",),
    )
    for version in ("0.2.2+lts", None):
        models.check_architecture(config, "/m", resolution(), version, reg=reg)


def test_unloadable_architectures_are_refused_with_what_the_plugin_looks_up() -> None:
    err = raised(arch, {"architectures": ["GptOssForCausalLM"]})
    assert str(err) == (
        "/m: architectures[0] GptOssForCausalLM GPT-OSS cannot be loaded by vllm-neuron 0.2.x (the plugin "
        "looks up 'gptoss'/'causal-lm' in NxD Inference): use a model whose config.json architectures[0] is "
        f"one of {ARCHS}"
    )
    err = raised(arch, {"architectures": ["LlamaForSequenceClassification"]})
    assert "LlamaForSequenceClassification cannot be loaded" in str(err) and "'llama'/" in str(err)
    err = raised(arch, {"model_type": "llama"})
    assert str(err).startswith(
        "/m: architectures[0] (none) cannot be loaded by vllm-neuron 0.2.x: use a model"
    )
    assert err.variables == ("SM_VLLM_MODEL",)


@pytest.mark.parametrize(
    ("versions", "said"),
    [
        ({}, "NxD Inference is not installed here"),
        (
            {"neuronx-distributed-inference": "0.7.14366"},
            "the installed NxD Inference 0.7.14366's registry could not be read (utils/constants.py)",
        ),
    ],
)
def test_off_the_image_the_plan_says_which_registry_it_assumed(versions: dict[str, str], said: str) -> None:
    p = llama_plan({}, llama_facts(versions=versions))
    assert (
        f"{said}: the model is checked against NxD Inference 0.7.14366's MODEL_TYPES "
        f"({', '.join(NXDI_0_7)}); on the image the installed registry is read instead"
    ) in p.warnings
    assert plan_document(p)["stack"]["nxd_inference"] == {
        "version": "0.7.14366",
        "source": "assumed",
        "model_types": list(NXDI_0_7),
    }
    assert plan_document(p)["stack"]["lane"] == "2.27"  # the existing keys stay


def test_on_the_image_the_installed_registry_decides_and_nothing_is_said() -> None:
    facts = llama_facts(
        2,
        PIXTRAL_CONFIG,
        versions={"neuronx-distributed-inference": "0.7.15063", "vllm-neuron": "0.2.2+lts"},
        nxdi_models=WITH_PIXTRAL,
    )
    p = llama_plan({}, facts)
    assert not [w for w in p.warnings if "MODEL_TYPES" in w]
    assert p.stack["nxd_inference"] == {
        "version": "0.7.15063",
        "source": "installed",
        "model_types": sorted(WITH_PIXTRAL),
    }
    without = llama_facts(2, PIXTRAL_CONFIG, versions=facts.versions, nxdi_models={"llama": ("causal-lm",)})
    assert "NxD Inference 0.7.15063 (installed here) does not have" in str(llama_refusal({}, without))
    assert "nxd_inference" not in plan(LLAMA_ENV, facts, device="cpu").stack  # the CPU checks no registry
