"""LoRA rules each NxD Inference lane reads from its own vLLM and plugin (plan/lanes/nxdi/overrides.py with
the lane's PluginRules): the max LoRA ranks of the lane's vLLM, and what lane 2.28's run-time adapters
need to compile. Each both ways, on both lanes."""

from __future__ import annotations

import pytest
from tests.support.builders import LORA_ENV, asset_facts, asset_plan, asset_refusal

LANE_2_28 = {"vllm": "0.13.0", "vllm-neuron": "0.4.1"}
RUNTIME = {"SM_VLLM_ENABLE_LORA": "true"}  # no adapters named: lane 2.28 loads them at run time


def test_rank_1_is_refused_on_vllm_0_11_and_planned_on_vllm_0_13() -> None:
    """vLLM 0.11.0's LoRAConfig accepts ranks 8..512 only (config/lora.py:104-109); 0.13.0 adds 1
    (MaxLoRARanks, config/lora.py:25). Lane 2.27 planned rank 1, which its vLLM refuses at start."""
    env = {**LORA_ENV, "SM_VLLM_MAX_LORA_RANK": "1"}
    err = asset_refusal(env)
    assert str(err) == (
        "SM_VLLM_MAX_LORA_RANK=1: vLLM 0.11.0 accepts a max LoRA rank of 8, 16, 32, 64, 128, 256, 320, 512: "
        "set the smallest one at least your adapters' rank `r`"
    )
    assert err.variables == ("SM_VLLM_MAX_LORA_RANK",)
    p = asset_plan(env, asset_facts(versions=LANE_2_28))
    assert p.argv[p.argv.index("--max-lora-rank") + 1] == "1"
    asset_plan({**LORA_ENV, "SM_VLLM_MAX_LORA_RANK": "8"})  # the neighbour on 2.27


@pytest.mark.parametrize("modules", [None, "[]", '""'])
def test_run_time_adapters_on_2_28_need_their_target_modules(modules: str | None) -> None:
    """With no adapter at start NxD Inference takes the target modules from none: target_modules=[]
    (modules/lora_serving/config.py:58-67, seen by building LoraServingConfig of NxD Inference 2.28.0),
    and LoRA injection then raises "Target modules [] not found in the base model"
    (modules/lora_serving/lora_model.py:57-74) when the model is built. Before, the plan planned it."""
    env = dict(RUNTIME)
    if modules is not None:
        env["SM_NEURON_TARGET_MODULES"] = modules
    err = asset_refusal(env, asset_facts(versions=LANE_2_28))
    assert str(err).startswith(
        "SM_VLLM_ENABLE_LORA=true with no adapters named: vllm-neuron 0.4.1 gives NxD Inference no target "
        "modules to inject LoRA into"
    )
    assert err.variables == ("SM_NEURON_TARGET_MODULES", "SM_VLLM_LORA_MODULES")
    for given in ('["q_proj", "v_proj"]', '"q_proj|v_proj"'):
        p = asset_plan({**RUNTIME, "SM_NEURON_TARGET_MODULES": given}, asset_facts(versions=LANE_2_28))
        assert any("loads them at run time" in w for w in p.warnings)
    asset_plan(LORA_ENV, asset_facts(versions=LANE_2_28))  # adapters named: their modules are read
