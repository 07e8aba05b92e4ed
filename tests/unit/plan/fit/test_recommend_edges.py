"""The edge cases of `plan --recommend` (plan/fit/recommend.py) mutation testing found unchecked
(docs/TESTING.md): the `plan --recommend --json` document in full (keys, rounding, env), the candidate
lengths at their boundaries, a pinned --max-model-len / --max-num-seqs, the MoE roofline (experts a batch
can touch, scaled by the checkpoint's own parameter count), and why_none's exact text. In process: the CLI
tests of test_recommend.py run a subprocess, which mutation testing cannot see into.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from tests.unit.plan.fit.test_recommend import DATA, cli, shape

from neuronserve.plan.fit import instances, memory, recommend
from neuronserve.plan.fit.instances import GIB

BF16 = memory.Precision(2, 2)
OVERHEAD = memory.DEFAULT_OVERHEAD_BYTES  # 1.5 GiB per core
TAIL = "(Overhead assumed 1.5 GiB per core: NEURONSERVE_HBM_OVERHEAD_GIB, docs/FIT.md)"


def why(name: str, instance: str, **pins: int) -> str:
    """why_none as `plan --recommend --json` gives it (the document, bf16, default overhead)."""
    doc = recommend.document(
        name,
        memory.Model(shape(name), BF16),
        instances.instance_facts(instance),
        OVERHEAD,
        "bfloat16",
        **pins,
    )
    assert doc["configurations"] == []
    text = doc["why_none"]
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize(
    ("max_position_embeddings", "expected"),
    [
        (None, [1024, 2048, 4096, 8192]),  # no limit in config.json: up to 8192
        (8192, [1024, 2048, 4096, 8192]),  # a power of two limit is listed once
        (5000, [1024, 2048, 4096, 5000]),  # any other limit ends the list
        (1024, [1024]),
        (1000, []),  # shorter than the shortest candidate: nothing to recommend
        (3 * 2**20, [2**k for k in range(10, 21)] + [3 * 2**20]),  # powers of two stop at 2**20
    ],
)
def test_candidate_lengths_at_their_boundaries(
    max_position_embeddings: int | None, expected: list[int]
) -> None:
    """The max_model_len values --recommend tries: powers of two from 1024 to 2**20 up to the model's
    max_position_embeddings (8192 when config.json has none), then that limit itself if it is not one of
    them, never twice; a pinned --max-model-len is the only one."""
    s = dataclasses.replace(shape("Llama-3.1-8B"), max_position_embeddings=max_position_embeddings)
    assert recommend.lengths(s, None) == expected
    assert recommend.lengths(s, 3000) == [3000]


def test_the_json_document_in_full_for_llama_8b_on_inf2_xlarge_at_4096() -> None:
    """Every key and value of `plan --recommend --json --max-model-len 4096` for Llama-3.1-8B on
    inf2.xlarge (the first half derives the numbers by hand): TP 1 cannot hold the weights, TP 2
    holds 16 sequences; 532.23 tokens/s rounds to one decimal, 30.0621824 ms to three; the env lines are
    the ones a user pastes (prefix caching off, as the estimate assumes)."""
    instance = instances.instance_facts("ml.inf2.xlarge")
    s = shape("Llama-3.1-8B")
    doc = recommend.document(
        "Llama-3.1-8B", memory.Model(s, BF16), instance, OVERHEAD, "bfloat16", max_model_len=4096
    )
    assert doc == {
        "instance": instance.as_json(),
        "model": {"name": "Llama-3.1-8B", **s.as_json(), "parameters": 8_030_261_248, "dtype": "bfloat16"},
        "ranking": {"by": "length", "max_model_len": 4096, "max_model_len_from": "--max-model-len"},
        "configurations": [
            {
                "tensor_parallel_size": 2,
                "data_parallel_size": 1,
                "max_model_len": 4096,
                "max_num_seqs": 16,
                "memory": {
                    "weights_bytes_per_core": 8_030_527_488,
                    "kv_bytes_per_core": 16 * 268_435_456,
                    "overhead_bytes_per_core": OVERHEAD,
                    "hbm_bytes_per_core": 16 * GIB,
                    "utilization": 0.8112,
                    "fits": True,
                },
                "projected_output_tokens_per_s": 532.2,
                "projected_ms_per_output_token": 30.062,
                "env": {
                    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
                    "SM_VLLM_DATA_PARALLEL_SIZE": "1",
                    "SM_VLLM_MAX_MODEL_LEN": "4096",
                    "SM_VLLM_MAX_NUM_SEQS": "16",
                    "SM_VLLM_DTYPE": "bfloat16",
                    "SM_VLLM_ENABLE_PREFIX_CACHING": "false",
                },
            }
        ],
    }


def test_the_document_reports_the_checkpoint_parameter_count_when_known() -> None:
    """With safetensors headers (--model-dir) the document's `parameters` is the checkpoint's own count,
    not the one the config implies."""
    model = memory.Model(shape("Llama-3.2-1B"), BF16, 1_234_567_890)
    doc = recommend.document("m", model, instances.instance_facts("inf2.xlarge"), OVERHEAD, "bfloat16")
    assert doc["model"]["parameters"] == 1_234_567_890


def test_a_pinned_max_num_seqs_is_the_only_batch_tried() -> None:
    """--max-num-seqs 3 (not a power of two): the one configuration uses exactly 3 sequences, at the pinned
    length, and its env says so."""
    doc = recommend.document(
        "Llama-3.1-8B",
        memory.Model(shape("Llama-3.1-8B"), BF16),
        instances.instance_facts("inf2.xlarge"),
        OVERHEAD,
        "bfloat16",
        max_model_len=4096,
        max_num_seqs=3,
    )
    [config] = doc["configurations"]
    assert (config["tensor_parallel_size"], config["max_model_len"], config["max_num_seqs"]) == (2, 4096, 3)
    assert config["env"]["SM_VLLM_MAX_NUM_SEQS"] == "3"
    assert config["memory"]["kv_bytes_per_core"] == 3 * 268_435_456


def test_why_none_when_the_model_is_too_big_for_the_instance() -> None:
    """Llama-3.3-70B on inf2.xlarge: the numbers at TP 2 for one 1024-token sequence, every instance type
    where it does fit (comma separated, in the table's order), and the overhead assumed, in GiB."""
    assert why("Llama-3.3-70B-Instruct", "inf2.xlarge") == (
        "nothing fits inf2.xlarge: even at TP 2 (all 2 NeuronCores), one sequence of 1024 tokens needs "
        "67.37 GiB per NeuronCore (weights 65.71 + KV cache 0.16 + overhead 1.50) of 16.00 GiB HBM = 421 %. "
        "It fits on: inf2.24xlarge, inf2.48xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge, "
        f"trn2u.48xlarge. {TAIL}"
    )


def test_why_none_at_a_pinned_length_names_where_that_length_fits() -> None:
    """--max-model-len 131072: the numbers are for one 131072-token sequence, and the instance types named
    are those that hold it, so inf2.24xlarge (which holds 1024 tokens, not 131072) is left out."""
    assert why("Llama-3.3-70B-Instruct", "inf2.xlarge", max_model_len=131072) == (
        "nothing fits inf2.xlarge: even at TP 2 (all 2 NeuronCores), one sequence of 131072 tokens needs "
        "87.21 GiB per NeuronCore (weights 65.71 + KV cache 20.00 + overhead 1.50) of 16.00 GiB HBM = 545 %. "
        f"It fits on: inf2.48xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge, trn2u.48xlarge. {TAIL}"
    )


def test_why_none_for_a_pinned_batch_counts_that_batch() -> None:
    """--max-model-len 4096 --max-num-seqs 32 on inf2.xlarge: one sequence would fit, 32 do not. The
    reason gives the numbers for 32 sequences and names the instance types that hold 32; it used to give
    one sequence's 58 % and name inf2.xlarge itself as a place where it fits (a bug, fixed)."""
    assert why("Llama-3.1-8B", "inf2.xlarge", max_model_len=4096, max_num_seqs=32) == (
        "nothing fits inf2.xlarge: even at TP 2 (all 2 NeuronCores), 32 sequences of 4096 tokens need "
        "16.98 GiB per NeuronCore (weights 7.48 + KV cache 8.00 + overhead 1.50) of 16.00 GiB HBM = 106 %. "
        "It fits on: inf2.24xlarge, inf2.48xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.3xlarge, "
        f"trn2.48xlarge, trn2u.48xlarge. {TAIL}"
    )


def test_why_none_for_a_model_no_instance_holds() -> None:
    """A 1.7-trillion-parameter model (Llama-3.3-70B's layers x 25) fits no instance in the table, and the
    reason says so in words, not with an empty list."""
    huge = dataclasses.replace(shape("Llama-3.3-70B-Instruct"), layers=2000)
    text = recommend.why_none(
        memory.Model(huge, BF16), instances.instance_facts("trn2.48xlarge"), 2 * GIB, None
    )
    assert text == (
        "nothing fits trn2.48xlarge: even at TP 64 (all 64 NeuronCores), one sequence of 1024 tokens needs "
        "59.74 GiB per NeuronCore (weights 56.76 + KV cache 0.98 + overhead 2.00) of 24.00 GiB HBM = 249 %. "
        "It fits on: no Neuron instance in the table. "
        "(Overhead assumed 2 GiB per core: NEURONSERVE_HBM_OVERHEAD_GIB, docs/FIT.md)"
    )


# Mixtral-8x7B at TP 16: each core holds 32 layers x 8 experts x 3 x 4096 x ceil(14336 / 16) = 896
# expert weights, 5,637,144,576 bytes in bf16. A decode step of B sequences routes B x 2 tokens, so it can
# touch min(8, 2B) of the 8 experts: 1 sequence reads 2/8 of them, 2 read 4/8, 4 or more read all.
MIXTRAL_EXPERT_BYTES_TP16 = 5_637_144_576


@pytest.mark.parametrize(("seqs", "untouched"), [(1, 0.75), (2, 0.5), (4, 0.0), (256, 0.0)])
def test_moe_roofline_reads_only_the_experts_a_batch_can_touch(seqs: int, untouched: float) -> None:
    """Bytes one decode step reads per core: the weight shard less the experts no routed token can reach,
    plus the whole KV cache."""
    model = memory.Model(shape("Mixtral-8x7B-v0.1"), BF16)
    full = memory.weights_bytes_per_core(model.shape, 16, BF16)
    kv = 123_456_789
    expected = full - untouched * MIXTRAL_EXPERT_BYTES_TP16 + kv
    assert recommend.decode_bytes_per_core(model, 16, seqs, kv) == expected


def test_moe_roofline_scales_with_the_checkpoint_parameter_count() -> None:
    """With safetensors headers saying the checkpoint has half the parameters the config implies, both
    the weight shard and the expert part of it are halved (the same ratio the memory estimate uses)."""
    s = shape("Mixtral-8x7B-v0.1")
    half = memory.hf_parameter_count(s) // 2
    model = memory.Model(s, BF16, half)
    full = memory.weights_bytes_per_core(s, 16, BF16, half)
    assert full == 2_936_934_400
    assert recommend.decode_bytes_per_core(model, 16, 4, 0) == full
    assert recommend.decode_bytes_per_core(model, 16, 1, 0) == full - 0.75 * MIXTRAL_EXPERT_BYTES_TP16 / 2


def test_experts_without_a_top_k_are_all_read() -> None:
    """A config with num_local_experts but no num_experts_per_tok: the routing width is unknown, so the
    roofline assumes every expert is read (the upper bound), not none."""
    config = json.loads((DATA / "Mixtral-8x7B-v0.1" / "config.json").read_text())
    del config["num_experts_per_tok"]
    s = memory.model_shape(config)
    assert (s.experts, s.experts_per_token) == (8, 0)
    model = memory.Model(s, BF16)
    assert recommend.decode_bytes_per_core(model, 16, 1, 0) == memory.weights_bytes_per_core(s, 16, BF16)


def test_no_recommendation_for_an_instance_the_lane_cannot_run() -> None:
    config = str(DATA / "Llama-3.1-8B" / "config.json")
    r = cli("--model-config", config, "--instance-type", "inf2.xlarge", NEURONSERVE_STACK="2.32")
    assert r.returncode == 2 and "use lane 2.28" in r.stderr and "Traceback" not in r.stderr
    ok = cli("--json", "--model-config", config, "--instance-type", "trn2.3xlarge", NEURONSERVE_STACK="2.32")
    assert ok.returncode == 0, ok.stderr
