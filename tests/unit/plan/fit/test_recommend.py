"""`neuronserve plan --recommend` (plan/fit/recommend.py) for the six test models on inf2.xlarge,
inf2.48xlarge, trn1.32xlarge and trn2.48xlarge: the JSON shape, hand-computed answers, a model that fits
nowhere, and that every recommended SM_VLLM_* set, fed back to the plan, is accepted with the very
estimate the recommendation printed. The edge cases mutation testing found: test_recommend_edges.py.
"""

from __future__ import annotations

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
from neuronserve.plan.fit import memory

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


def recommend_cli(model: str, instance: str, *extra: str, status: int = 0) -> dict[str, Any]:
    r = cli(
        "--json", "--model-config", str(DATA / model / "config.json"), "--instance-type", instance, *extra
    )
    assert r.returncode == status, r.stderr
    doc = json.loads(r.stdout)
    assert isinstance(doc, dict)
    return doc


def test_llama_8b_on_inf2_xlarge_by_hand() -> None:
    # TP 1: 16,060,522,496 bytes of weights alone exceed 16 GiB - 1.5 GiB: no. TP 2: weights 8,030,527,488;
    # one 4096-token sequence = 32*2*4*128*4096*2 = 268,435,456 bytes of KV; room 7,538,728,960 = 28.08
    # sequences -> 16 (powers of two). Roofline: (8,030,527,488 + 16 * 268,435,456) / 410e9 = 30.062 ms
    # per step -> 16 / 0.030062 = 532.2 tokens/s, DP = 2 // 2 = 1.
    doc = recommend_cli("Llama-3.1-8B", "ml.inf2.xlarge", "--max-model-len", "4096")
    assert set(doc) == {"instance", "model", "ranking", "configurations"}
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
    doc = recommend_cli("Llama-3.3-70B-Instruct", "inf2.xlarge", status=2)  # nothing fits: exit 2
    assert doc["configurations"] == []
    assert "nothing fits inf2.xlarge" in doc["why_none"] and "inf2.48xlarge" in doc["why_none"]
    assert "inf2.8xlarge" not in doc["why_none"]
    text = cli(
        "--model-config",
        str(DATA / "Llama-3.3-70B-Instruct" / "config.json"),
        "--instance-type",
        "inf2.xlarge",
    )
    assert text.returncode == 2 and "nothing fits inf2.xlarge" in text.stdout


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
    weights = memory.Model(shape, memory.Precision(2, 2))
    by_rate = rec.document(name, weights, facts, memory.DEFAULT_OVERHEAD_BYTES, "bfloat16", rank="throughput")
    rates = [c["projected_output_tokens_per_s"] for c in by_rate["configurations"]]
    assert rates == sorted(rates, reverse=True)
    doc = rec.document(name, weights, facts, memory.DEFAULT_OVERHEAD_BYTES, "bfloat16")
    configs = doc["configurations"]
    assert configs or "why_none" in doc
    assert sorted(map(str, configs)) == sorted(map(str, by_rate["configurations"]))  # the same, reordered
    if configs:  # by length: the model's own first when it fits, else the longest that does
        top = max(c["max_model_len"] for c in configs)
        assert configs[0]["max_model_len"] == top
        assert ("note" in doc) is (top != shape.max_position_embeddings)
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


@cache
def shape(name: str) -> memory.ModelShape:
    return memory.model_shape(json.loads((DATA / name / "config.json").read_text()))


def best(doc: dict[str, Any]) -> int:
    length: int = doc["configurations"][0]["max_model_len"]
    return length


@pytest.mark.parametrize(
    ("instance", "first"), [("ml.inf2.xlarge", 65536), ("inf2.48xlarge", 131072), ("trn1.32xlarge", 131072)]
)
def test_the_best_configuration_serves_the_models_own_length(instance: str, first: int) -> None:
    """Issue 29: ranked by throughput alone, Llama-3.1-8B's best was max_model_len 1024 everywhere. By
    length (the default): its max_position_embeddings (131072) where it fits, else the longest that does,
    said in a note; `--rank throughput` keeps the old order."""
    doc = recommend_cli("Llama-3.1-8B", instance)
    assert best(doc) == first
    assert doc["ranking"] == {
        "by": "length",
        "max_model_len": 131072,
        "max_model_len_from": "config.json max_position_embeddings",
    }
    assert ("note" in doc) is (first != 131072)
    assert best(recommend_cli("Llama-3.1-8B", instance, "--rank", "throughput")) == 1024


@pytest.mark.parametrize(
    ("env", "source"),
    [
        ({"SM_VLLM_MAX_MODEL_LEN": "4096"}, "SM_VLLM_MAX_MODEL_LEN"),
        ({"OPTION_N_POSITIONS": "3000"}, "OPTION_N_POSITIONS"),
    ],
)
def test_the_users_length_comes_first(env: dict[str, str], source: str) -> None:
    config = str(DATA / "Llama-3.1-8B" / "config.json")
    r = cli("--json", "--model-config", config, "--instance-type", "inf2.48xlarge", **env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    wanted = int(next(iter(env.values())))
    assert best(doc) == wanted and doc["ranking"]["max_model_len_from"] == source
    lengths = [c["max_model_len"] for c in doc["configurations"]]
    above = [n for n in lengths if n > wanted]
    assert lengths[lengths.count(wanted) : lengths.count(wanted) + len(above)] == sorted(above)  # then longer
    text = cli("--model-config", config, "--instance-type", "inf2.48xlarge", **env)
    assert f"max_model_len {wanted} ({source}) first" in text.stdout


def test_a_users_length_that_is_no_number_is_refused() -> None:
    r = cli(
        "--model-config",
        str(DATA / "Qwen3-8B"),
        "--instance-type",
        "inf2.xlarge",
        SM_VLLM_MAX_MODEL_LEN="long",
    )
    assert r.returncode == 2 and "SM_VLLM_MAX_MODEL_LEN='long' must be a positive integer" in r.stderr


def test_model_config_takes_a_model_directory(tmp_path: Path) -> None:
    """`--model-config DIR` failed with a raw `[Errno 21] Is a directory`: DIR/config.json is read (with
    the safetensors headers, as --model-dir), and a missing or empty one is said plainly."""
    by_dir = recommend_cli("Qwen3-8B", "inf2.48xlarge").copy()
    r = cli("--json", "--model-config", str(DATA / "Qwen3-8B"), "--instance-type", "inf2.48xlarge")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["configurations"] == by_dir["configurations"]
    r = cli("--model-config", str(tmp_path), "--instance-type", "inf2.xlarge")
    assert r.returncode == 2 and f"--model-config={tmp_path}: a directory without a config.json" in r.stderr
    r = cli("--model-config", str(tmp_path / "config.json"), "--instance-type", "inf2.xlarge")
    assert r.returncode == 2 and r.stderr.strip().endswith(
        f"--model-config {tmp_path / 'config.json'}: no such file"
    )
    assert "Errno" not in r.stderr
