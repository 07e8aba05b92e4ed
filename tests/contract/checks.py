"""What the contract tier asserts of one case, as functions of the plan and the stack's result (the tests in
test_*.py call them): a plan the project accepts builds; the numbers it states are the built ones; its
prediction of the serialised configuration is NxD Inference's; a refusal is the stack's too (or, resting on
an estimate, names its override).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.contract.planning import Planned

# Refusals that rest on neuronserve's own rules or the host, not on the stack's configuration code: the
# variables they name (a remote cache to hit, cores visible on this host, data-parallel replicas,
# logical cores of a chip that has none).
OWN_RULE_VARIABLES = frozenset(
    {
        "NEURONSERVE_REQUIRE_CACHE_HIT",
        "NEURONSERVE_CACHE_URI",
        "SM_VLLM_DATA_PARALLEL_SIZE",
        "NEURON_RT_VISIBLE_CORES",
        "NEURON_LOGICAL_NC_CONFIG",
    }
)
# The overrides an estimate-based refusal names (plan/fit: the HBM estimate; Pixtral's README limit).
ESTIMATE_OVERRIDES = ("NEURONSERVE_FIT_CHECK",)
CITATION = re.compile(r"\w+(\.py)?:\d+")


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def override(planned: Planned) -> dict[str, Any]:
    assert planned.plan is not None
    return dict(planned.plan.neuron_override or {})


def built_sections(stack: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The built configuration's neuron_config documents, under the names compiled.py predicts."""
    ser = stack["serialized"]
    out: dict[str, dict[str, Any]] = {}
    if (
        "text_config" in ser
        and isinstance(ser["text_config"], dict)
        and "neuron_config" in ser["text_config"]
    ):
        out["text_neuron_config"] = ser["text_config"]["neuron_config"]
        out["vision_neuron_config"] = ser["vision_config"]["neuron_config"]
    else:
        out["neuron_config"] = ser["neuron_config"]
    spec = ser.get("fused_spec_config")
    if isinstance(spec, dict) and isinstance(spec.get("draft_config"), dict):
        out["draft_neuron_config"] = spec["draft_config"]["neuron_config"]
    return out


def text_config(stack: dict[str, Any]) -> dict[str, Any]:
    sections = built_sections(stack)
    return sections.get("neuron_config") or sections["text_neuron_config"]


def differences(predicted: Any, built: Any, where: str = "") -> list[str]:
    """Every predicted field whose built value differs (a dict is compared on the predicted keys; the
    LoRA target modules, a set NxD Inference serialises in no fixed order, as a set)."""
    if isinstance(predicted, dict) and isinstance(built, dict):
        out: list[str] = []
        for key, value in predicted.items():
            if key not in built:
                out.append(
                    f"{where}{key}: predicted {json.dumps(value)}, absent from the built configuration"
                )
            else:
                out += differences(value, built[key], f"{where}{key}.")
        return out
    if where.endswith("target_modules.") and isinstance(built, list) and isinstance(predicted, list):
        predicted, built = sorted(predicted), sorted(built)
    if predicted != built:
        return [f"{where.rstrip('.')}: predicted {json.dumps(predicted)}, built {json.dumps(built)}"]
    return []


def stated_numbers(planned: Planned) -> dict[str, Any]:
    """The numbers the plan states, where it states them (its argv, its override, its memory estimate),
    as NxD Inference names them."""
    plan = planned.plan
    assert plan is not None
    argv = list(plan.argv)
    ov = override(planned)
    text = ov.get("text_neuron_config", ov) if isinstance(ov.get("text_neuron_config"), dict) else ov
    chunked = "--enable-chunked-prefill" in argv
    seqs = int(flag(argv, "--max-num-seqs") or 0)
    out: dict[str, Any] = {
        "tp_degree": int(flag(argv, "--tensor-parallel-size") or 0),
        "batch_size": 1 if chunked else seqs,
        "seq_len": int(flag(argv, "--max-model-len") or 0),
    }
    if chunked:
        out["max_context_length"] = int(flag(argv, "--max-num-batched-tokens") or 0)
    blocks = flag(argv, "--num-gpu-blocks-override")
    if blocks is not None:
        out["pa_num_blocks"] = int(blocks) + 1  # vllm-neuron platform.py:220-230 adds the null block
    if flag(argv, "--block-size") is not None and "--enable-prefix-caching" in argv:
        out["pa_block_size"] = int(flag(argv, "--block-size") or 0)
    if "on_device_sampling_config" in text:
        out["on_device_sampling_config"] = text["on_device_sampling_config"]
    spec = json.loads(flag(argv, "--speculative-config") or "null")
    if isinstance(spec, dict):
        out["speculation_length"] = int(spec.get("num_speculative_tokens") or 0)
    for name in ("max_loras", "max_lora_rank"):
        value = flag(argv, "--" + name.replace("_", "-"))
        if value is not None:
            out[f"lora_config.{name}"] = int(value)
    for key in ("quantized", "quantization_type", "quantization_dtype", "logical_nc_config"):
        if key in text:
            out[key] = text[key]
    return out


def number_differences(planned: Planned, stack: dict[str, Any]) -> list[str]:
    built = text_config(stack)
    out = []
    for key, value in stated_numbers(planned).items():
        section, _, field = key.partition(".")
        actual = (built.get(section) or {}).get(field) if field else built.get(section)
        if key == "on_device_sampling_config" and isinstance(value, dict) and isinstance(actual, dict):
            out += differences(value, actual, "on_device_sampling_config.")
        elif actual != value:
            out.append(f"{key}: the plan states {json.dumps(value)}, built {json.dumps(actual)}")
    plan = planned.plan
    assert plan is not None
    if plan.memory:
        kv = stack["kv"]
        real = sum(part["bytes_per_core"] for part in kv.values())
        if plan.memory["kv_bytes_per_core"] != real:
            out.append(
                f"KV bytes per core: the plan estimates {plan.memory['kv_bytes_per_core']}, NxD Inference "
                f"allocates {real} ({json.dumps(kv)})"
            )
    return out


def prediction_differences(planned: Planned, stack: dict[str, Any]) -> list[str]:
    predicted = (planned.key_inputs.get("graph") or {}).get("compiled")
    if predicted is None:
        return ["the cache key holds no predicted configuration (plan/lanes/nxdi/compiled.py)"]
    built = built_sections(stack)
    out = []
    for section, fields in predicted.items():
        if section not in built:
            out.append(f"{section}: predicted, but NxD Inference built no such configuration")
            continue
        out += differences(fields, built[section], f"{section}.")
    return out


def refusal_kind(planned: Planned) -> str:
    """ "estimate" (an HBM or length estimate: names its override), "own" (neuronserve's own rule or a host
    fact the configuration code cannot see) or "stack" (the stack's rule: the stack must refuse too)."""
    err = planned.refusal
    assert err is not None
    if any(name in str(err) for name in ESTIMATE_OVERRIDES):
        return "estimate"
    variables = set(err.variables)
    if variables and variables <= OWN_RULE_VARIABLES | {v for v in variables if v.startswith("NEURONSERVE_")}:
        return "own"
    if "NeuronCores" in str(err) and ("visible" in str(err) or "NEURONSERVE_INSTANCE_TYPE=" in str(err)):
        return "own"  # the cores a host or an instance has: a fact the configuration code cannot see
    return "stack"


def lora_differences(stack: dict[str, Any]) -> list[str]:
    """NxD Inference wraps LoRA around the modules target_modules names and raises when none is found
    (modules/lora_serving/lora_model.py:70-72, both lanes): an empty list finds none. The tier builds no
    layers (child.py kv_cache), so it checks the built list instead of running the injection."""
    lora = text_config(stack).get("lora_config")
    if isinstance(lora, dict) and not lora.get("target_modules"):
        return [
            "lora_config.target_modules is empty: NxD Inference raises at model build (lora_model.py:70-72)"
        ]
    return []
