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
KNOWN: list[tuple[int, str, str]] = []


# Combinations the stack builds without an error but runs wrong: (pattern over case ids, why, with the
# line that shows it). The plan must refuse each, citing a line.
SILENT: list[tuple[str, str]] = [
    (
        r"^2\.27/chunked\+lora/",
        "the chunked-prefill path passes no adapter ids (vllm-neuron 0.2.2+lts "
        "worker/neuronx_distributed_model_runner.py:676-684): every request runs the base model",
    ),
    (
        r"/lora\+eagle/",
        "fused speculation takes the adapter ids and never passes them on (NxD Inference "
        "models/model_base.py:2902-2910): the adapter is ignored",
    ),
    (
        r"/eagle\+cpusampling/",
        "the fused-speculation model sets do_sample on a None sampling config when it is built, after the "
        "compile this tier stops at (NxD Inference models/model_base.py:1689-1691)",
    ),
    (
        r"^2\.27/chunked\+cpusampling/",
        "logits come back only for finished prefills (loader:356-361) but are masked by every request's "
        "position (runner:1195-1221): a step with a partial prefill fails",
    ),
    (
        r"^2\.27/chunked\+eagle/",
        "the chunked-prefill inputs carry no draft tokens (runner:1075-1135) and fused speculation has no "
        "chunked-prefill path",
    ),
    (
        r"/lora\+multimodal/",
        "the multimodal forward never passes the adapter ids to the model, so a request's adapter is "
        "ignored (vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:500-508; 0.4.1 :653-686)",
    ),
    (
        r"/issue-42-misspelt-override$",
        'NxD Inference logs "NeuronConfig init: Unexpected keyword arguments" and compiles without the key '
        "(models/config.py:563 at v0.7.14366, :605 at 2.28.0)",
    ),
    (
        r"/issue-42-eagle3$",
        'the plugin turns on NxD Inference\'s EAGLE path only for method "eagle" (vllm-neuron 0.2.2+lts '
        "worker/neuronx_distributed_model_loader.py:791-794, 0.4.1 :1112-1118): eagle3 compiles as a plain "
        "fused draft model",
    ),
    (
        r"^2\.27/issue-42-ngram$",
        "vLLM hands the target model over as the draft for ngram (vLLM 0.11.0 config/speculative.py:275-279) "
        "and the plugin compiles it as a fused draft model (vllm-neuron 0.2.2+lts loader :291-301): no "
        "prompt lookup",
    ),
    (
        r"/issue-42-eagle3-override-with-prefix$",
        "the fused-speculation model asserts against EAGLE3 with prefix caching when it is built for tracing "
        "(NxD Inference models/model_base.py:1707 at v0.7.14366, :1700 at 2.28.0), after the compile this "
        "tier stops at",
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
