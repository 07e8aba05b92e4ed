"""The NxD Inference lanes' steps (plan/lanes/nxdi/steps.py): the order is the contract. With two
settings wrong, the refusal names the one an earlier step checks; each pair below is refused on its
own too, so the test shows the order rather than one rule missing."""

from __future__ import annotations

import pytest
from tests.support.builders import LLAMA, llama_facts, llama_plan, llama_refusal
from tests.support.configs import VERSIONS

from neuronserve.plan.lanes.nxdi import launch, steps
from neuronserve.types import Integration

BERT = {**LLAMA, "architectures": ["BertForMaskedLM"]}
# Each: (the earlier step's setting, the later step's setting), each alone refused naming its variable.
PAIRS = [
    ({"SM_VLLM_TASK": "embed"}, {"SM_VLLM_DTYPE": "auto"}, "SM_VLLM_TASK", "SM_VLLM_DTYPE"),
    (
        {"SM_VLLM_TENSOR_PARALLEL_SIZE": "4"},
        {"SM_VLLM_DTYPE": "auto"},
        "SM_VLLM_TENSOR_PARALLEL_SIZE",
        "SM_VLLM_DTYPE",
    ),
    (
        {"SM_VLLM_DTYPE": "auto"},
        {"SM_VLLM_BLOCK_SIZE": "7", "SM_VLLM_ENABLE_PREFIX_CACHING": "true"},
        "SM_VLLM_DTYPE",
        "SM_VLLM_BLOCK_SIZE",
    ),
    (
        {"SM_VLLM_BLOCK_SIZE": "7", "SM_VLLM_ENABLE_PREFIX_CACHING": "true"},
        {"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"beam": 1}'},
        "SM_VLLM_BLOCK_SIZE",
        "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG",
    ),
]


@pytest.mark.parametrize(("first", "later", "first_var", "later_var"), PAIRS, ids=lambda v: str(v)[:30])
def test_the_earlier_step_names_its_setting_when_both_are_wrong(
    first: dict[str, str], later: dict[str, str], first_var: str, later_var: str
) -> None:
    assert first_var in llama_refusal(first).variables
    assert later_var in llama_refusal(later).variables
    assert first_var in llama_refusal({**first, **later}).variables
    assert later_var not in llama_refusal({**first, **later}).variables


def test_the_architecture_is_checked_before_the_launch_numbers() -> None:
    both = llama_refusal({"SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}, llama_facts(config=BERT))
    assert "BertForMaskedLM" in str(both) and both.variables == ("SM_VLLM_MODEL",)


def test_the_integration_is_chosen_first_and_later_steps_read_it() -> None:
    assert steps.STEPS[0].__name__ == "_integration"
    in_tree = llama_plan(
        {"NEURONSERVE_INTEGRATION": "in-tree", "SM_VLLM_QUANTIZATION": "neuron_quant"},
        llama_facts(versions={"vllm": "0.10.2", "vllm-neuron": None}),
    )
    assert in_tree.integration == Integration.IN_TREE  # the plugin's quantization guard did not run
    assert "--quantization" in in_tree.argv
    assert "SM_VLLM_QUANTIZATION" in llama_refusal({"SM_VLLM_QUANTIZATION": "neuron_quant"}).variables


def test_the_launch_numbers_resolve_before_the_rules_that_read_them() -> None:
    names = [step.__name__ for step in steps.STEPS]
    for number in (launch.tp, launch.model_len, launch.seqs, launch.dtype, launch.max_context):
        assert number in steps.STEPS
    assert names.index("tp") < names.index("_lora") < names.index("_kv") < names.index("_buckets")
    assert names.index("max_context") < names.index("_buckets") < names.index("_sequence_parallel")


CHUNKED = {
    "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
    "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 4}',
    "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512",
}


def test_chunked_prefill_is_refused_on_lane_2_28_and_plans_on_2_27() -> None:
    """NxD Inference 2.28 raises NotImplementedError("Chunked Prefill is not available in NxDI for now")
    for any chunked_prefill_config when the model is built (models/model_base.py:3096-3097), which
    tests/contract sees on every chunked configuration of lane 2.28; NxD Inference 0.7 builds it."""
    lane_2_28 = llama_facts(versions={**VERSIONS, "vllm": "0.13.0", "vllm-neuron": "0.4.1"})
    err = llama_refusal(CHUNKED, lane_2_28)
    assert err.variables == ("SM_VLLM_ENABLE_CHUNKED_PREFILL",)
    assert "vllm-neuron 0.4.1" in str(err) and "model_base.py:3096-3097" in str(err)
    assert "--enable-chunked-prefill" in llama_plan(CHUNKED).argv
