"""What a request may ask of an NxD Inference lane's engine (`plan.request_support`), from the plugin's
source.

vllm-neuron 0.2.2+lts answers some request fields by silently ignoring them; the front refuses a
request that needs one (front/, from this object), so the plan decides here, once, which ones:

- on device (the default: the loader's OnDeviceSamplingConfig(dynamic=True, deterministic=False),
  worker/neuronx_distributed_model_loader.py:734-735): get_nxd_sampling_params passes only top_k,
  top_p and temperature to the device (worker/neuronx_distributed_model_runner.py:1244-1278), so
  presence/frequency/repetition penalties and min_p are dropped; the device sample returns
  `logprobs_tensors=None` (loader :367-375), so the output's logprobs are None (runner :473-475).
- on the CPU (`on_device_sampling_config: null`): _sample hands the logits to vLLM's own Sampler with
  the batch's sampling metadata (runner :1225-1229, :1356), which applies penalties and min_p and
  returns logprobs (runner :473-482, "CPU sampling supports logprobs").
- either way: prompt logprobs are never returned (`prompt_logprobs_dict={}`, runner :484), and
  execute_model (runner :379-416) never reads the scheduler's grammar_bitmask, so structured outputs
  (JSON schema, regex, grammar, guided_*) are not enforced.
- on the CPU device (vLLM's CPU engine) everything is allowed. The in-tree integration (vLLM 0.9/0.10)
  is not judged by this source and is left allowed too.
- lane 2.28 (vllm-neuron 0.4.1, profiles.py): the same, except that structured outputs are
  enforced when sampling on the CPU: sample_tokens applies the grammar bitmask there (0.4.1
  worker/neuronx_distributed_model_runner.py:248-260) and ignores it on the device, with a warning
  (:229-242). Prompt logprobs are still never returned (:903).
"""

from __future__ import annotations

from typing import Any

from neuronserve.plan.lanes.nxdi.profiles import V0_2, PluginRules
from neuronserve.types import Device, Integration, RequestSupport

CANNOT_PROMPT_LOGPROBS = (
    "vllm-neuron 0.2.2+lts cannot: it never returns prompt logprobs (its model runner always answers an "
    "empty prompt_logprobs_dict)"
)
CANNOT_STRUCTURED = (
    "vllm-neuron 0.2.2+lts cannot: its model runner never applies the structured-output grammar bitmask, "
    "so JSON schemas, regexes and grammars would not be enforced"
)


def cpu_sampling(override: dict[str, Any] | None) -> bool:
    """True when the rendered override samples on the CPU: on_device_sampling_config given as null,
    in text_neuron_config for a multimodal model (which the loader reads there, :431-435), else at the
    top level. A missing key keeps the plugin's on-device default."""
    if not override:
        return False
    text = override.get("text_neuron_config")
    if isinstance(text, dict) and "on_device_sampling_config" in text:
        return text["on_device_sampling_config"] is None
    return "on_device_sampling_config" in override and override["on_device_sampling_config"] is None


def cpu_sampling_setting(override: dict[str, Any] | None) -> str:
    """The setting that turns CPU sampling on, as the refusal names it."""
    if override and "text_neuron_config" in override:
        return 'set SM_NEURON_OVERRIDE_CONFIG=\'{"text_neuron_config": {"on_device_sampling_config": null}}\''
    return "set SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null"


def request_support(
    device: Device, integration: Integration, override: dict[str, Any] | None, rules: PluginRules = V0_2
) -> RequestSupport:
    """The RequestSupport of a plan: its device, its integration, its rendered override and its lane's
    plugin (`rules`)."""
    if device != "neuron" or integration != Integration.PLUGIN:
        return RequestSupport()
    why = {"prompt_logprobs": CANNOT_PROMPT_LOGPROBS.replace(V0_2.plugin, rules.plugin)}
    on_cpu = cpu_sampling(override)
    structured = on_cpu and rules.structured_outputs_on_cpu
    if not on_cpu:
        enable = (
            f"{cpu_sampling_setting(override)} (CPU sampling; {rules.plugin} samples on the device "
            "with temperature, top_k and top_p only)"
        )
        why["logprobs"] = enable
        why["penalties"] = enable
    if not structured:
        why["structured_outputs"] = (
            f"{cpu_sampling_setting(override)} (CPU sampling; {rules.plugin} applies the grammar only there)"
            if rules.structured_outputs_on_cpu
            else CANNOT_STRUCTURED
        )
    return RequestSupport(
        logprobs=on_cpu,
        prompt_logprobs=False,
        penalties=on_cpu,
        structured_outputs=structured,
        why=why,
    )
