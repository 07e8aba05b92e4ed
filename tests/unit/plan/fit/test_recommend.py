"""`neuronserve plan --recommend` for the six test models on inf2.xlarge, inf2.48xlarge, trn1.32xlarge and
trn2.48xlarge: the JSON shape, hand-computed answers, a model that fits nowhere, and that every recommended
SM_VLLM_* set, fed back to the plan, is accepted with the very estimate the recommendation printed.

The second half holds the edge cases mutation testing found unchecked (docs/TESTING.md): the
`plan --recommend --json` document in full (keys, rounding, env), the candidate lengths at their
boundaries, a pinned --max-model-len / --max-num-seqs, the MoE roofline (experts a batch can touch,
scaled by the checkpoint's own parameter count), and why_none's exact text. In process: the CLI tests of
the first half run a subprocess, which mutation testing cannot see into.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from neuronserve.config.settings import parse_settings
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import instances, memory, recommend
from neuronserve.plan.fit.instances import GIB

DATA = Path(__file__).parents[3] / "data" / "models"
MODELS = [
    "Llama-3.2-1B",
    "Llama-3.1-8B",
    "Llama-3.3-70B-Instruct",
    "Qwen2.5-7B",
    "Qwen3-8B",
    "Mixtral-8x7B-v0.1",
]
INSTANCES = ["ml.inf2.xlarge", "inf2.48xlarge", "trn1.32xlarge", "trn2.48xlarge"]
SRC = str(Path(__file__).parents[4] / "src")


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "NEURON"))}
    return subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan", "--recommend", *args],
        env={**base, "PYTHONPATH": SRC, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def recommend_cli(model: str, instance: str, *extra: str) -> dict[str, Any]:
    r = cli(
        "--json", "--model-config", str(DATA / model / "config.json"), "--instance-type", instance, *extra
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert isinstance(doc, dict)
    return doc


def test_llama_8b_on_inf2_xlarge_by_hand() -> None:
    # TP 1: 16,060,522,496 bytes of weights alone exceed 16 GiB - 1.5 GiB: no. TP 2: weights 8,030,527,488;
    # one 4096-token sequence = 32*2*4*128*4096*2 = 268,435,456 bytes of KV; room 7,538,728,960 = 28.08
    # sequences -> 16 (powers of two). Roofline: (8,030,527,488 + 16 * 268,435,456) / 410e9 = 30.062 ms
    # per step -> 16 / 0.030062 = 532.2 tokens/s, DP = 2 // 2 = 1.
    doc = recommend_cli("Llama-3.1-8B", "ml.inf2.xlarge", "--max-model-len", "4096")
    assert set(doc) == {"instance", "model", "configurations"}
    assert doc["instance"]["name"] == "inf2.xlarge" and doc["instance"]["neuron_cores"] == 2
    [config] = doc["configurations"]
    assert {
        k: config[k] for k in ("tensor_parallel_size", "data_parallel_size", "max_model_len", "max_num_seqs")
    } == {
        "tensor_parallel_size": 2,
        "data_parallel_size": 1,
        "max_model_len": 4096,
        "max_num_seqs": 16,
    }
    assert config["memory"]["kv_bytes_per_core"] == 16 * 268_435_456
    assert config["projected_output_tokens_per_s"] == pytest.approx(532.2, abs=0.1)
    assert config["projected_ms_per_output_token"] == pytest.approx(30.062, abs=0.001)
    assert config["env"] == {
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
        "SM_VLLM_DATA_PARALLEL_SIZE": "1",
        "SM_VLLM_MAX_MODEL_LEN": "4096",
        "SM_VLLM_MAX_NUM_SEQS": "16",
        "SM_VLLM_DTYPE": "bfloat16",
        "SM_VLLM_ENABLE_PREFIX_CACHING": "false",
    }


def test_a_model_that_fits_nowhere_on_the_instance() -> None:
    # Llama-3.3-70B: 141 GB of bf16 weights over 2 cores of 16 GiB.
    doc = recommend_cli("Llama-3.3-70B-Instruct", "inf2.xlarge")
    assert doc["configurations"] == []
    assert "nothing fits inf2.xlarge" in doc["why_none"] and "inf2.48xlarge" in doc["why_none"]
    assert "inf2.8xlarge" not in doc["why_none"]
    text = cli(
        "--model-config",
        str(DATA / "Llama-3.3-70B-Instruct" / "config.json"),
        "--instance-type",
        "inf2.xlarge",
    )
    assert text.returncode == 0 and "nothing fits inf2.xlarge" in text.stdout


@pytest.mark.parametrize("instance", INSTANCES)
@pytest.mark.parametrize("model", MODELS)
def test_every_recommendation_is_accepted_by_the_plan(model: str, instance: str) -> None:
    from neuronserve.commands.recommend import _instance, _model
    from neuronserve.plan.fit import memory
    from neuronserve.plan.fit import recommend as rec

    class Args:
        model_config = str(DATA / model / "config.json")
        model_dir = None
        instance_type = instance

    name, config, _ = _model(Args(), {})  # type: ignore[arg-type]
    facts = _instance(Args(), {})  # type: ignore[arg-type]
    shape = memory.model_shape(config)
    doc = rec.document(
        name, memory.Model(shape, memory.Precision(2, 2)), facts, memory.DEFAULT_OVERHEAD_BYTES, "bfloat16"
    )
    configs = doc["configurations"]
    rates = [c["projected_output_tokens_per_s"] for c in configs]
    assert rates == sorted(rates, reverse=True)
    assert configs or "why_none" in doc
    host = HostFacts(python="py", paths={"/m": ModelFacts("dir", config, "d" * 64)})
    for c in configs[:3] + configs[-1:]:
        assert c["memory"]["fits"] and c["data_parallel_size"] * c["tensor_parallel_size"] == facts.cores
        env = {
            **c["env"],
            "SM_VLLM_MODEL": "/m",
            "NEURONSERVE_DEVICE": "neuron",
            "NEURONSERVE_INSTANCE_TYPE": instance,
        }
        plan = build_plan(parse_settings(env), host)
        assert plan.memory == c["memory"]
        assert len(plan.replicas) == c["data_parallel_size"]


def test_recommend_needs_a_model_and_an_instance(tmp_path: Path) -> None:
    r = cli("--instance-type", "inf2.xlarge")
    assert r.returncode == 2 and "--model-config" in r.stderr
    r = cli("--model-config", str(DATA / "Qwen3-8B" / "config.json"))
    assert r.returncode == 2 and "--instance-type" in r.stderr
    r = cli("--model-config", str(DATA / "Qwen3-8B" / "config.json"), "--instance-type", "p4d.24xlarge")
    assert r.returncode == 2 and "not a Neuron instance type" in r.stderr
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    r = cli("--model-dir", str(tmp_path), "--instance-type", "inf2.xlarge")
    assert r.returncode == 2 and "hidden_size" in r.stderr


def test_text_output_gives_the_best_sm_vllm_lines() -> None:
    r = cli("--model-config", str(DATA / "Qwen2.5-7B" / "config.json"), "--instance-type", "trn1.32xlarge")
    assert r.returncode == 0, r.stderr
    best = r.stdout.split("best configuration:\n", 1)[1].splitlines()
    assert best[0].startswith("SM_VLLM_TENSOR_PARALLEL_SIZE=") and "SM_VLLM_MAX_NUM_SEQS=" in r.stdout


def test_plan_instance_type_flag_checks_the_fit() -> None:
    # Same refusal as NEURONSERVE_INSTANCE_TYPE (test_memory.py: 16 GiB of KV on a 16 GiB core).
    env = {
        "SM_VLLM_MODEL": str(DATA / "Llama-3.1-8B"),
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
        "SM_VLLM_MAX_MODEL_LEN": "8192",
        "SM_VLLM_MAX_NUM_SEQS": "32",
    }
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "NEURON"))}
    run = [sys.executable, "-m", "neuronserve", "plan", "--json", "--device", "neuron"]
    full = {**base, "PYTHONPATH": SRC, **env}
    r = subprocess.run([*run, "--instance-type", "ml.inf2.xlarge"], env=full, capture_output=True, text=True)
    assert r.returncode == 2 and "SM_VLLM_MAX_NUM_SEQS<=14" in r.stderr
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE" not in r.stderr  # no TP above 2 on 2 cores
    # Same per-core HBM on inf2.48xlarge, but 24 cores: TP 4 halves the KV heads per core (2): 8 GiB of KV.
    big = [*run, "--instance-type", "ml.inf2.48xlarge"]
    r = subprocess.run(big, env=full, capture_output=True, text=True)
    assert r.returncode == 2 and "SM_VLLM_TENSOR_PARALLEL_SIZE=4 (of 24 NeuronCores)" in r.stderr
    r = subprocess.run(big, env={**full, "SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["memory"]["fits"] is True


# --- edge cases found by mutation testing ---------------------------------------------------------


BF16 = memory.Precision(2, 2)
OVERHEAD = memory.DEFAULT_OVERHEAD_BYTES  # 1.5 GiB per core
TAIL = "(Overhead assumed 1.5 GiB per core: NEURONSERVE_HBM_OVERHEAD_GIB, docs/FIT.md)"


@cache
def shape(name: str) -> memory.ModelShape:
    return memory.model_shape(json.loads((DATA / name / "config.json").read_text()))


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
