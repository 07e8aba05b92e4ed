"""The settings table's prose defaults name the values the plan uses."""

from __future__ import annotations


def test_table_defaults_match_the_code() -> None:
    from neuronserve.config.table import ENGINE_VARS
    from neuronserve.plan.kv import DEFAULT_BLOCK_SIZE
    from neuronserve.plan.neuron import DEFAULT_DTYPE, DEFAULT_MAX_NUM_SEQS

    defaults = {v.name: v.default for v in ENGINE_VARS}
    assert defaults["SM_VLLM_MAX_NUM_SEQS"].startswith(f"{DEFAULT_MAX_NUM_SEQS} ")
    assert defaults["SM_VLLM_BLOCK_SIZE"].startswith(f"{DEFAULT_BLOCK_SIZE} ")
    assert defaults["SM_VLLM_DTYPE"].startswith(f"{DEFAULT_DTYPE} ")
