"""What the two NxD Inference plugin generations do differently, as data the rules read.

Lanes 2.27 (vllm-neuron 0.2.2+lts) and 2.28 (vllm-neuron 0.4.1) share the plan: the same STEPS
(steps.py), the same `--additional-config {"override_neuron_config": ...}` render (engine.py), the same
KV, bucket, sampling and max_prompt_length rules. The rules that differ read one `PluginRules` (the
lane's, `Lane.rules` in plan/lanes/registry.py, read as `Launch.rules`) instead of being forked. Each
difference below was read from 0.4.1's source (whn09/vllm-neuron 4fac6b7, `release-0.4.1`), cited as
"0.4.1 <file>:<line>" under vllm_neuron/; 0.2.2+lts's lines are the ones the rules already cite.

Read and found the SAME in 0.4.1 (no per-lane rule needed):
- max_prompt_length is still compiled as `max_context_length` and checked against the override's
  (0.4.1 worker/neuronx_distributed_model_loader.py:1265-1278, as 0.2.2+lts :926-940), and a
  multimodal model's override still accepts only the two nested objects
  (0.4.1 loader :1283-1289 asserted from :596-598): launch.py and multimodal.py hold for both.
- chunked prefill still asserts chunked_prefill_config and the block layout (0.4.1 loader :1180-1182).
- vLLM's --quantization is still never read: only the override's quantization keys are (0.4.1 loader
  :1225-1240), so plan/lanes/nxdi/guards.py's refusal holds.
- LoRA still reads `lora_ckpt_json` and `target_modules` by popping them from
  override_neuron_config (0.4.1 worker/neuronx_distributed_model_runner.py:481-485), so an override is
  still always rendered; and a request without an adapter still fails the runner when LoRA is on:
  `request_data.lora_request.lora_name` with lora_request None (0.4.1 runner :1507-1511), so
  request_support.adapter_required stays True in 2.28.
- prompt logprobs are still never returned (`prompt_logprobs_dict={}`, 0.4.1 runner :903) and the
  device sample still carries temperature/top_k/top_p only, so logprobs and penalties still need CPU
  sampling (0.4.1 runner :892-901 "CPU sampling supports logprobs").
- the HBM fit estimate (plan/fit/memory.py, plan/fit/check.py) models NxD Inference's weights, KV cache and
  buckets, which 0.4.1 configures with the same keys (the default neuron_config, 0.4.1 loader
  :1059-1119, as 0.2.2+lts :728-796): the fit check is the same in both lanes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PluginRules:
    """One NxD Inference plugin generation's facts, each a rule's parameter.

    - `plugin`, `family`: how messages name it.
    - `architectures`: the config.json architectures[0] values that load, as refusals list them.
    - `nxdi`, `model_types`: the lane's NxD Inference release and its MODEL_TYPES keys (utils/constants.py),
      the registry assumed where none is installed (plan/lanes/nxdi/models.py).
    - `model_renames`: the plugin's own renames of the lower-cased architecture prefix before that
      lookup (`_get_neuron_model_cls`).
    - `multimodal`: architectures whose heads are read from config.json's text_config (constants.py
      NEURON_MULTI_MODAL_MODELS).
    - `nested`: architectures built as an image-to-text model, whose override is nested
      (text_neuron_config / vision_neuron_config, plan/lanes/nxdi/multimodal.py).
    - `contiguous_only`: architectures NxD Inference builds without a block KV layout and without fused
      speculation (each model's own `__init__` raises "does not yet support block_kv_layout" / "fused
      speculation", or turns them off with a warning: plan/lanes/nxdi/multimodal.py CONTIGUOUS_SOURCES).
    - `pixtral_max_seqs`: Pixtral's batch cap, None when the plugin has none.
    - `structured_outputs_on_cpu`: CPU sampling applies the grammar bitmask.
    - `adapters_at_start`: LoRA needs its adapters named at start (lora_ckpt_json); False: the
      adapters may also arrive at run time.
    - `vllm`, `block_sizes`, `lora_ranks`: the lane's vLLM, its --block-size values (config/cache.py
      BlockSize) and the LoRA ranks its LoRAConfig accepts.
    - `chunked_prefill_forced`: the lane's vLLM turns chunked prefill on for every generate model with no
      way to turn it off, so the native scheduler (DISABLE_NEURON_CUSTOM_SCHEDULER=1) always chunks.
    - `warn_eagle3`: say that a speculative method "eagle3" is not what the plugin's source wires
      (`check_eagle3`); off for 2.27, whose plans stay as they were.
    - `chunked_prefill_refused`: where the lane's NxD Inference refuses chunked prefill when it builds
      the model ("" when it builds it).
    - `vision_required`: (architecture, vision_neuron_config key, value) the lane's NxD Inference asserts
      for a model's vision encoder (plan/lanes/nxdi/multimodal.py `nest` renders them, a contrary
      user value is refused); `vision_defaults`: the same for values the plan chooses when the user
      does not (said in a warning).
    """

    plugin: str
    family: str  # "vllm-neuron 0.2.x": the series, for messages about what it cannot load
    architectures: tuple[str, ...]  # what loads (rules.check_architecture), named in refusals
    nxdi: str
    model_types: tuple[str, ...]
    model_renames: tuple[tuple[str, str], ...]
    multimodal: tuple[str, ...]
    nested: tuple[str, ...]
    contiguous_only: tuple[str, ...]
    pixtral_max_seqs: int | None
    structured_outputs_on_cpu: bool
    adapters_at_start: bool
    vllm: str
    block_sizes: tuple[int, ...]
    lora_ranks: tuple[int, ...]
    chunked_prefill_forced: bool
    warn_eagle3: bool = False
    chunked_prefill_refused: str = ""
    vision_required: tuple[tuple[str, str, Any], ...] = ()
    vision_defaults: tuple[tuple[str, str, Any], ...] = ()


PIXTRAL = "LlavaForConditionalGeneration"
LLAMA4 = "Llama4ForConditionalGeneration"
MLLAMA = "MllamaForConditionalGeneration"
QWEN2_VL = "Qwen2VLForConditionalGeneration"
QWEN3_VL = "Qwen3VLForConditionalGeneration"

# vllm-neuron 0.2.2+lts on NxD Inference 0.7 (lane 2.27): the values the rules always had.
# model_types: NxD Inference 0.7.14366 (SDK 2.27.0) utils/constants.py:41-51, which has no pixtral (the
# 0.7.15063 of SDK 2.27.1 images is not public: the image's own is read there); renames: loader
# :646-666 (qwen3moe only);
# multimodal: worker/constants.py:4-7; nested: loader :679-682; contiguous only: NxD Inference
# 0.7.14366 models/llama4/modeling_llama4.py:94-103, models/pixtral/modeling_pixtral.py:50-59;
# Pixtral's cap: loader :442-447;
# structured outputs: execute_model never reads the grammar bitmask (runner :379-416); adapters: the
# adapter list is the only way adapters reach NxD Inference's LoraModelManager built by the runner
# (runner :217-220). vLLM 0.11.0: BlockSize config/cache.py:24; LoRA ranks config/lora.py:104-109 (no
# rank 1); chunked prefill set True for every generate model in engine/arg_utils.py:1546-1548, after
# the flag is read (--no-enable-chunked-prefill is overwritten).
V0_2 = PluginRules(
    plugin="vllm-neuron 0.2.2+lts",
    family="vllm-neuron 0.2.x",
    architectures=(
        "LlamaForCausalLM",
        "Llama4ForCausalLM",
        LLAMA4,
        MLLAMA,
        "MixtralForCausalLM",
        "DbrxForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        PIXTRAL,  # from 0.2.2 (rules.check_architecture)
    ),
    nxdi="0.7.14366",
    model_types=("gpt_oss", "llama", "llama4", "mllama", "mixtral", "dbrx", "qwen2", "qwen3", "qwen3_moe"),
    model_renames=(("qwen3moe", "qwen3_moe"),),
    multimodal=(MLLAMA, PIXTRAL, LLAMA4),
    nested=(LLAMA4, PIXTRAL),
    contiguous_only=(LLAMA4, PIXTRAL),
    pixtral_max_seqs=4,
    structured_outputs_on_cpu=False,
    adapters_at_start=True,
    vllm="vLLM 0.11.0",
    block_sizes=(1, 8, 16, 32, 64, 128),
    lora_ranks=(8, 16, 32, 64, 128, 256, 320, 512),
    chunked_prefill_forced=True,
)

# vllm-neuron 0.4.1 on NxD Inference of SDK 2.28 (lane 2.28):
# - renames: 0.4.1 loader :957-967 maps gptoss -> gpt_oss, qwen3moe -> qwen3_moe, qwen2vl -> qwen2_vl,
#   qwen3vl -> qwen3_vl before `MODEL_TYPES[model][task]` (:972), ConditionalGeneration read as
#   CausalLM (:952-953). GptOssForCausalLM therefore loads in 2.28 (0.2.2+lts looked up "gptoss").
# - model_types: NxD Inference of SDK 2.28.0 (aws-neuron/neuronx-distributed-inference cd3abf30558f, which
#   the lane's image pins as 0.8.16251) utils/constants.py:47-64: 2.27's plus pixtral, qwen2_vl and
#   qwen3_vl, which 0.4.1 renames into (:963-967) and builds (:994-1001).
# - multimodal: 0.4.1 worker/constants.py:4-10 adds both Qwen VL classes (heads from text_config,
#   loader :902-903).
# - nested: both Qwen VL classes are NeuronMultiModalCausalLM subclasses (:760, :821), whose
#   load_weights validates and nests the override (:575-627) like Llama 4 and Pixtral.
# - contiguous only: NxD Inference 2.28's Llama 4 and Pixtral raise at the same lines as 0.7's, Qwen3-VL
#   too (models/qwen3_vl/modeling_qwen3_vl.py:76-85), and Qwen2-VL sets the four flags false with a
#   warning (models/qwen2_vl/modeling_qwen2_vl.py:80-91) while vLLM schedules for them.
# - Pixtral: NeuronMultiModalCausalLM.load_weights (:575-627) has no batch check any more (0.2.2+lts
#   raised above 4 at loader :442-447).
# - structured outputs: sample_tokens applies the grammar bitmask on the CPU-sampling path (0.4.1
#   runner :248-260) and ignores it, with a warning, when sampling on the device (:229-242).
# - adapters: lora_ckpt_json is optional (`pop(..., None)`, runner :485), the model's own
#   lora_model_manager serves the adapters (:538-539), dynamic multi-LoRA is on with
#   VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 or max_cpu_loras > 0 (:487-490), and the worker's
#   add_lora/remove_lora reach the runner (0.4.1 worker/neuron_worker.py:204-208).
# - EAGLE3: AWS lists EAGLE3 for Llama 3.1 8B in 2.28, but 0.4.1 turns on NxD Inference's EAGLE path
#   only for method "eagle" (loader :1117-1118, as 0.2.2+lts :793-794); what is new is the draft's
#   own class, detected from its config.json with the target's as fallback (:355-409), and a
#   `draft_overrides` override key (:184). So "eagle3" is planned with a warning (check_eagle3).
# - vLLM 0.13.0: BlockSize adds 256 (config/cache.py:22), MaxLoRARanks adds 1 (config/lora.py:25), and
#   chunked prefill defaults on but --no-enable-chunked-prefill is honoured (engine/arg_utils.py:1857-1870).
V0_4 = PluginRules(
    plugin="vllm-neuron 0.4.1",
    family="vllm-neuron 0.4.x",
    architectures=(*V0_2.architectures, "GptOssForCausalLM", QWEN2_VL, QWEN3_VL),
    nxdi="0.8.16251",
    model_types=(*V0_2.model_types, "pixtral", "qwen2_vl", "qwen3_vl"),
    model_renames=(
        ("gptoss", "gpt_oss"),
        ("qwen3moe", "qwen3_moe"),
        ("qwen2vl", "qwen2_vl"),
        ("qwen3vl", "qwen3_vl"),
    ),
    multimodal=(MLLAMA, PIXTRAL, LLAMA4, QWEN2_VL, QWEN3_VL),
    nested=(LLAMA4, PIXTRAL, QWEN2_VL, QWEN3_VL),
    contiguous_only=(LLAMA4, PIXTRAL, QWEN2_VL, QWEN3_VL),
    pixtral_max_seqs=None,
    structured_outputs_on_cpu=True,
    adapters_at_start=False,
    vllm="vLLM 0.13.0",
    block_sizes=(1, 8, 16, 32, 64, 128, 256),
    lora_ranks=(1, 8, 16, 32, 64, 128, 256, 320, 512),
    chunked_prefill_forced=False,
    warn_eagle3=True,
    # NxD Inference 2.28 NeuronBaseForCausalLM.__init__ raises NotImplementedError("Chunked Prefill is
    # not available in NxDI for now") for any chunked_prefill_config (models/model_base.py:3096-3097):
    # tests/contract builds it and sees the raise, where NxD Inference 0.7 (lane 2.27) builds it.
    chunked_prefill_refused="NxD Inference 2.28 models/model_base.py:3096-3097",
    # NxD Inference 2.28 Qwen2VLInferenceConfig asserts the vision encoder's fused_qkv
    # (models/qwen2_vl/modeling_qwen2_vl.py:109), which NeuronConfig leaves False (models/config.py).
    vision_required=((QWEN2_VL, "fused_qkv", True),),
    # Its vision encoder's buckets are image counts (modeling_qwen2_vl_vision.py:271-272); NeuronConfig's
    # default [seq_len] fails the assert that the largest one's tokens fit the text model (:108-109).
    vision_defaults=((QWEN2_VL, "buckets", [1]),),
)


def plugin_at_least(version: str | None, floor: tuple[int, ...]) -> bool:
    """`version` (e.g. "0.2.2+lts") is at least `floor`; unknown is the image's default 0.2.2+lts.

    Only the release part counts (a local "+lts" suffix is no version), and a piece's decimal digits
    alone are read: int() refuses a "²" that str.isdigit accepts."""
    if not version:
        return True
    parts: list[int] = []
    for piece in version.split("+")[0].split(".")[: len(floor)]:
        digits = "".join(ch for ch in piece if ch.isdecimal())
        parts.append(int(digits or 0))
    return tuple(parts) >= floor


def check_eagle3(method: str, origin: str, rules: PluginRules) -> str | None:
    """The warning a speculative method "eagle3" gets on a lane whose plugin source does not wire it."""
    if not rules.warn_eagle3 or method.lower() != "eagle3":
        return None
    return (
        f"{origin}: method eagle3 on {rules.plugin}, which turns on NxD Inference's EAGLE path only for "
        'method "eagle" (it compiles eagle3 as a plain fused draft unless NxD Inference detects it from '
        "the draft's config.json); AWS lists EAGLE3 for Llama 3.1 8B in this SDK: check the compile log"
    )
