"""Feature combinations the plugin starts with and then runs wrongly, or fails on after the compile.

Found by reading the runner's input preparation (vllm-neuron 0.2.2+lts
worker/neuronx_distributed_model_runner.py, `_prepare_model_input` and what it calls; 0.4.1 the same
paths) and NxD Inference's fused-speculation model for every pair of prefix caching, chunked prefill,
block KV, LoRA, EAGLE, quantization, CPU sampling, on-device sampling configs, multimodal models and
tool calling. Each refusal below names both settings and cites the lines that show why; the pairs
NxD Inference itself refuses at build are refused where their rule lives (kv.py, multimodal.py), the
request-level ones (tool_choice "required" with no grammar) by the front (front/support.py).
"""

from __future__ import annotations

from neuronserve.errors import ConfigError
from neuronserve.plan.lanes.nxdi.profiles import PluginRules
from neuronserve.plan.resolution import Resolution

SAMPLING = "on_device_sampling_config"


def cpu_sampling(res: Resolution) -> bool:
    """on_device_sampling_config null (CPU sampling), at the top of the override or in text_neuron_config."""
    text = res.override.get("text_neuron_config")
    nested = isinstance(text, dict) and SAMPLING in text and text[SAMPLING] is None
    return (SAMPLING in res.override and res.override[SAMPLING] is None) or nested


def check_combinations(arch: str, *, lora: bool, chunked: bool, res: Resolution, rules: PluginRules) -> None:
    """Refuse the pairs the plugin runs wrongly (the first one found, in this order).

    - LoRA on a multimodal model: the multimodal `execute_model` and `forward` build the model call
      without the batch's adapter ids (0.2.2+lts worker/neuronx_distributed_model_loader.py:461-475,
      500-508; 0.4.1 :633-650, 672-681), so every request runs the base model, its adapter ignored.
    - LoRA with chunked prefill: `_prepare_model_input` sets `lora_adapter_ids = None` on the
      chunked-prefill path (0.2.2+lts worker/neuronx_distributed_model_runner.py:676-684; 0.4.1
      :1227-1240): every request runs the base model.
    - LoRA with speculative decoding: the plugin turns on NxD Inference's fused speculation for any
      speculative config (loader :787-794), whose forward takes the adapter ids and never passes them on
      (NxD Inference 0.7.14366 models/model_base.py:2902-2910, 2.28.0 :2899-2907): its target and draft
      run with empty adapter ids (0.7.14366 :1816-1827, :2012): the adapter is ignored.
    - Speculative decoding with CPU sampling: the fused-speculation model sets the draft's
      on_device_sampling_config.do_sample when it is built (0.7.14366 models/model_base.py:1689-1691,
      2.28.0 :1675-1677), which CPU sampling leaves None: AttributeError at load, after the compile.
    - Chunked prefill with CPU sampling: the model returns logits only for the requests whose prefill
      the step finishes (loader :356-361, 0.4.1 :515-521), but the runner then masks and reorders rows
      by the position of every scheduled request (runner :1195-1221, 0.4.1 :811-828): a step with a
      partial prefill (any prompt longer than the chunk) masks another request's logits or indexes past
      the rows, failing the engine step.
    - Speculative decoding with chunked prefill: the chunked-prefill inputs carry one token and one
      slot per scheduled position and no draft tokens (runner :1075-1135), where the continuous-batching
      path adds the speculative slots (:961-967), and NxD Inference's fused-speculation model has no
      chunked-prefill path (models/model_base.py:1656-3000 never reads is_chunked_prefill).
    """
    lora_var = res.origins["enable-lora"]
    chunk_var = res.origins["enable-chunked-prefill"]
    spec_var = res.origins["speculative-config"]
    sampling_var = res.origin("text_neuron_config" if SAMPLING not in res.override else SAMPLING)
    speculative = res.speculation.config is not None
    cpu = cpu_sampling(res)
    if lora and arch in rules.nested:
        raise ConfigError(
            f"{lora_var}=true: the plugin never passes a request's adapter to {arch} (its multimodal "
            "forward carries no adapter ids: 0.2.2+lts loader:500-508, 0.4.1 loader:672-681), so every "
            f"request would run the base model: unset {lora_var}",
            (lora_var,),
        )
    pairs = (
        (
            lora and chunked,
            f"{lora_var}=true with chunked prefill: the plugin passes no adapter ids on its chunked-prefill "
            "path (0.2.2+lts runner:676-684, 0.4.1 runner:1227-1240), so every request would run the base "
            "model",
            (lora_var, chunk_var),
        ),
        (
            lora and speculative,
            f"{lora_var}=true with speculative decoding: NxD Inference's fused speculation runs the target "
            "model without the request's adapter (NxD Inference models/model_base.py:2902-2910), so "
            "adapters would be ignored",
            (lora_var, spec_var),
        ),
        (
            speculative and cpu,
            f"{spec_var} with CPU sampling: NxD Inference's fused speculation needs on-device sampling (it "
            "fails when the model is built, after the compile: models/model_base.py:1689-1691)",
            (spec_var, sampling_var),
        ),
        (
            chunked and cpu,
            f"{chunk_var}=true with CPU sampling: the plugin returns logits only for the prefills a step "
            "finishes (loader:356-361) but masks them by every request's position (runner:1195-1221), "
            "so a step with a partial prefill fails",
            (chunk_var, sampling_var),
        ),
        (
            speculative and chunked,
            f"{spec_var} with chunked prefill: the plugin's chunked-prefill inputs carry no draft tokens or "
            "speculative slots (runner:1075-1135), and NxD Inference's fused speculation has no "
            "chunked-prefill path",
            (spec_var, chunk_var),
        ),
    )
    for found, why, names in pairs:
        if found:
            raise ConfigError(f"{why}: unset one of {' or '.join(names)}", names)


def check_routing(arch: str, model: str, rules: PluginRules) -> None:
    """An architecture the runner routes as multimodal that the loader builds as a text model.

    The runner sends every request of a NEURON_MULTI_MODAL_MODELS architecture to
    `self.model.execute_model` (0.2.2+lts worker/neuronx_distributed_model_runner.py:406-409, 666;
    0.4.1 :749-752, 1099), but the loader builds only Llama 4 and Pixtral (0.4.1: and Qwen2-VL /
    Qwen3-VL) as a multimodal class; MllamaForConditionalGeneration becomes a NeuronCausalLM
    (worker/neuronx_distributed_model_loader.py:675-680; 0.4.1 :994-1003), which defines no
    execute_model: the engine starts (the warm-up swallows the error, runner :1438-1441) and every
    request fails. The plugin's README lists no Mllama (0.4.1's: only on the legacy fork).
    `rules.multimodal` less `rules.nested` is that set."""
    if arch in rules.multimodal and arch not in rules.nested:
        raise ConfigError(
            f"{model}: {arch} starts but every request fails on {rules.plugin}: the runner sends its "
            "requests to the multimodal path while the loader builds it as a text model without one; use a "
            "supported architecture",
            ("SM_VLLM_MODEL",),
        )
