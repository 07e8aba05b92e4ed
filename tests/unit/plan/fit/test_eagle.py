"""plan/fit/eagle.py: an EAGLE head's shape from its target's (no local config.json)."""

from __future__ import annotations

import json

from bench import fit_estimate
from tests.support.golden_plans import MODELS

from neuronserve.plan.fit import eagle, memory

BF16 = memory.Precision(2, 2)
LLAMA8 = memory.Model(
    memory.model_shape(json.loads((MODELS / "Llama-3.1-8B" / "config.json").read_text())), BF16
)


def test_eagle_methods_are_recognised() -> None:
    assert eagle.is_eagle("eagle") and eagle.is_eagle("EAGLE3")
    assert not eagle.is_eagle("") and not eagle.is_eagle("medusa")


def test_an_eagle3_head_is_one_layer_an_fc_and_a_vocabulary_of_its_targets_shape() -> None:
    """EAGLE-3 on Llama-3.1-8B, counted by hand from the paper's and NxD Inference's definition
    (modeling_llama.py:1211-1214, 1394-1400): QKV from 2 x hidden, output projection, the MLP, the fc
    from 3 x hidden, embedding and lm_head, three norms."""
    h, q, kv, mlp, vocab = 4096, 32 * 128, 8 * 128, 14336, 128256
    by_hand = 2 * h * (q + 2 * kv) + q * h + 3 * h * mlp + 3 * h * h + 2 * vocab * h + 3 * h
    head = eagle.head(LLAMA8, "eagle3")
    assert head.shape.layers == 1 and head.checkpoint_params == by_hand
    assert eagle.head(LLAMA8, "eagle").checkpoint_params == by_hand - h * (q + 2 * kv) - h * h
    gpt_oss = fit_estimate._models()["gpt-oss-120b"]  # bench/data/estimate/models.json
    moe = eagle.head(memory.Model(gpt_oss, BF16), "eagle3").shape  # dense, as wide as a token's experts
    assert (moe.experts, moe.layers, moe.intermediate) == (0, 1, 4 * 2880)
