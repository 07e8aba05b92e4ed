"""An EAGLE draft head's shape, read from its target's: for the HBM check and the speed estimate when
the head has no local config.json (a hub or s3:// head). Pure.

EAGLE (Li et al., arXiv:2401.15077) drafts with one decoder layer of the target's hidden size, fed by an
fc projection of [token embedding; target hidden state] (2 x hidden -> hidden); EAGLE-3 (arXiv:2503.01840)
feeds it three of the target's hidden states (3 x hidden -> hidden) and widens the layer's attention
input to [embedding; fused hidden] (2 x hidden). NxD Inference builds exactly that as the draft
(../shared/reference/nxdi-0.7.14366 src/neuronx_distributed_inference/models/llama/modeling_llama.py):
the fc at 1394-1400 (3 x hidden in for EAGLE-3, 2 x hidden otherwise), the EAGLE-3 layer's doubled
attention input at 1211-1214, and a full-vocabulary embedding and lm_head like any decoder's at 1344-1366
(the head's checkpoint carries the target's lm_head.weight: plan/lanes/nxdi/rules.py check_eagle).
In a token-generation step the draft runs once per speculated token (model_base.py:2597, k - 1 candidate
runs, and the final run after the target's at 2708); in context encoding it runs over the whole prompt
after the target (model_base.py:2082-2119): plan/fit/estimate.py charges it like any draft.

What is not read from the target but assumed: the head's MLP width is the target layer's per-token width
(intermediate_size, times top_k for an MoE target: the head is dense), and its KV heads and head_dim are
the target's. No fitted constant: the head's cost is its bytes, its one layer and its FLOPs, at the
generation's constants.
"""

from __future__ import annotations

from dataclasses import replace

from neuronserve.plan.fit import memory


def is_eagle(method: str) -> bool:
    """`method` of --speculative-config names an EAGLE head ("eagle", "eagle3")."""
    return "eagle" in method.lower()


def head(target: memory.Model, method: str) -> memory.Model:
    """The EAGLE head of `target` (method "eagle3": EAGLE-3's fc and attention input; else EAGLE's)."""
    t = target.shape
    eagle3 = "eagle3" in method.lower()
    shape = replace(
        t,
        layers=1,
        intermediate=t.intermediate * (t.experts_per_token if t.experts else 1),
        experts=0,
        experts_per_token=0,
        tied=False,
    )
    fc = (3 if eagle3 else 2) * t.hidden * t.hidden
    wider_qkv = t.hidden * (t.heads + 2 * t.kv_heads) * t.head_dim if eagle3 else 0
    params = memory.hf_parameter_count(shape) + fc + wider_qkv
    return memory.Model(shape, target.precision, params)
