"""The disagreements between the plan and the stack that are being fixed elsewhere: each case that shows one
fails here until the fix is merged (strict xfail: once it passes, the marker must go).

Issue 25, "Why": items 1-9 and 11 are fixed on branch r25-fixes, item 10 (an instance's cores) on r25-flags.
Each entry: the item, and which cases show it (by their id; tests/contract/cases.py).
"""

from __future__ import annotations

import re

FIXES = "r25-fixes"
FLAGS = "r25-flags"

# (item, branch, pattern over case ids). The first matching entry is the case's reason.
KNOWN: list[tuple[int, str, str]] = [
    # 6: Pixtral is not in NxD Inference 0.7.14366's registry (utils/constants.py MODEL_TYPES): every
    # Pixtral case on lane 2.27 stops there (loader:657-666).
    (6, FIXES, r"^2\.27/(?!chunked\+).*pixtral"),
    # 1: Llama 4 / Pixtral with prefix caching or the block layout (modeling_llama4.py:94-97,
    # modeling_pixtral.py:50-53); on lane 2.28 Qwen2-VL too: NxD Inference 2.28's image-to-text base
    # raises for prefix caching and fused speculation (models/image_to_text_model_base.py:168-171).
    (1, FIXES, r"/prefix\+multimodal/"),
    (5, FIXES, r"/blockkv\+multimodal/"),
    # 2: Llama 4 / Pixtral (and Qwen2-VL, as above) with EAGLE (modeling_llama4.py:102-103,
    # modeling_pixtral.py:58-59).
    (2, FIXES, r"/eagle\+multimodal/"),
    # 8: combinations the stack builds but runs wrong (SILENT below): the plan must refuse them.
    (8, FIXES, r"/lora\+multimodal/"),
    # 3: quantized without a checkpoint path (loader:888-901 fills None; models/config.py:200-203 asserts);
    # golden configuration 07 is EAGLE with SM_NEURON_QUANTIZED=true and no path.
    (3, FIXES, r"issue-3-|^golden/.*/07$"),
    # 4: prefix caching with the native scheduler: vLLM turns chunked prefill on, the loader asserts a
    # chunked_prefill_config (loader:844-846).
    (4, FIXES, r"issue-4-"),
    # 5: the block layout without prefix caching or chunked prefill (block_kv_cache_manager.py:40-47).
    (5, FIXES, r"issue-5-|/blockkv/|/blockkv\+(cpusampling|eagle|lora|ondevice|quant|tools)/"),
    # 9: refused though the stack builds it (a tool parser alone; global_topk above 256, capped by
    # runner:259-267). NEURON_ON_DEVICE_SAMPLING_DISABLED is refused by both, for another reason
    # (test_issue_cases.py).
    (9, FIXES, r"issue-9-(tool-parser-alone|global-topk)"),
    # 11: lane differences read from one lane.
    (11, FIXES, r"issue-11-"),
    # 10: TP larger than the instance (golden configuration 12 is TP 8; inf2.xlarge has 2 cores).
    (10, FLAGS, r"^golden/laptop-2\.27-inf2\.xlarge/12$"),
]


# Combinations the stack builds without an error but runs wrong: (pattern over case ids, why, with the
# line that shows it). The plan must refuse each, citing a line.
SILENT: list[tuple[str, str]] = [
    (
        r"/lora\+multimodal/",
        "the multimodal forward never passes the adapter ids to the model, so a request's adapter is "
        "ignored (vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:500-508; 0.4.1 :653-686)",
    ),
    (
        r"/blockkv\+multimodal/qwen2-vl",
        "NxD Inference 2.28 turns the block KV layout (and prefix caching, chunked prefill, fused "
        "speculation) off for Qwen2-VL's text model with a warning "
        "(models/qwen2_vl/modeling_qwen2_vl.py:80-91)",
    ),
]


def silent(case_id: str) -> str | None:
    for pattern, why in SILENT:
        if re.search(pattern, case_id):
            return why
    return None


def known(case_id: str) -> tuple[int, str] | None:
    for item, branch, pattern in KNOWN:
        if re.search(pattern, case_id):
            return item, branch
    return None


def reason(case_id: str) -> str | None:
    found = known(case_id)
    if found is None:
        return None
    item, branch = found
    return f"issue 25 item {item}: fixed on branch {branch}"
