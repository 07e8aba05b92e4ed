"""`neuronserve plan --recommend` (plan/fit/recommend.py, commands/recommend.py), through the CLI: every
rule of issue 43 point 4 is checked by running `neuronserve plan` on what `--recommend` printed (its env,
verbatim, plus the model directory, the instance and the Neuron device it runs on) and checking it plans
with no refusal and no HBM warning, with the very memory and estimate `--recommend` gave; the refusal
parity (what plan refuses, --recommend refuses with the same error, exit 2); the goals and the filters,
checked against each configuration's own estimate, never a hard-coded order. In-process edge cases:
test_recommend_edges.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from tests.unit.plan.fit.test_estimate import KEYS

from neuronserve.plan.fit import instances, memory, prices

DATA = Path(__file__).parents[3] / "data" / "models"
SRC = str(Path(__file__).parents[4] / "src")
HBM_WARNING = "HBM estimate on"  # plan/fit/check.py: every HBM warning and refusal starts so


def run(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "NEURON", "AWS_"))}
    return subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan", *argv],
        env={**base, "PYTHONPATH": SRC, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run("--recommend", *args, **env)


def recommend_cli(model: str, instance: str, *extra: str, status: int = 0, **env: str) -> dict[str, Any]:
    r = cli(
        "--json",
        "--model-config",
        str(DATA / model / "config.json"),
        "--instance-type",
        instance,
        *extra,
        **env,
    )
    assert r.returncode == status, r.stderr
    doc = json.loads(r.stdout)
    assert isinstance(doc, dict)
    return doc


def plan_env(model: str, instance: str, env: dict[str, str], *flags: str) -> dict[str, Any]:
    """`neuronserve plan --json` of a printed env, verbatim, on the instance: it must plan (exit 0) with
    no HBM warning."""
    r = run(
        "--json",
        "--instance-type",
        instance,
        *flags,
        **env,
        SM_VLLM_MODEL=str(DATA / model),
        NEURONSERVE_DEVICE="neuron",
    )
    assert r.returncode == 0, f"{env}\n{r.stderr}"
    doc = json.loads(r.stdout)
    assert not [w for w in doc["warnings"] if HBM_WARNING in w], doc["warnings"]
    assert isinstance(doc, dict)
    return doc


def accepted_as_printed(model: str, instance: str, doc: dict[str, Any], *flags: str) -> None:
    """The first configuration, one in the middle and the last plan as printed: same memory, same
    estimate, DP x TP on the instance's cores."""
    configs = doc["configurations"]
    assert configs, doc
    for c in {id(x): x for x in (configs[0], configs[len(configs) // 2], configs[-1])}.values():
        plan = plan_env(model, instance, c["env"], *flags)
        assert plan["memory"] == c["memory"]
        assert plan["estimate"] == c["estimate"]
        assert len(plan["replicas"]) == c["data_parallel_size"]


def test_the_first_configuration_keeps_the_headroom_plan_asks_for() -> None:
    """Llama-3.3-70B on trn1.32xlarge: the first recommendation was TP 16 x DP 2 at 131072 tokens, 93 % of
    the HBM, which `plan` warns may run out of memory. Now every configuration plans without the warning,
    and that one is dropped (counted), as `plan` itself says of it."""
    doc = recommend_cli("Llama-3.3-70B-Instruct", "trn1.32xlarge")
    accepted_as_printed("Llama-3.3-70B-Instruct", "trn1.32xlarge", doc)
    assert all(c["memory"]["utilization"] <= memory.WARN_UTILIZATION for c in doc["configurations"])
    old = {"tensor_parallel_size": 16, "max_model_len": 131072, "max_num_seqs": 1}
    assert not [c for c in doc["configurations"] if {k: c[k] for k in old} == old]
    assert any("HBM above 90%" in d["reason"] for d in doc["dropped"])
    env = {
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "16",
        "SM_VLLM_DATA_PARALLEL_SIZE": "2",
        "SM_VLLM_MAX_MODEL_LEN": "131072",
        "SM_VLLM_MAX_NUM_SEQS": "1",
    }
    r = run(
        "--json",
        "--instance-type",
        "trn1.32xlarge",
        **env,
        SM_VLLM_MODEL=str(DATA / "Llama-3.3-70B-Instruct"),
        NEURONSERVE_DEVICE="neuron",
    )
    assert r.returncode == 0 and [w for w in json.loads(r.stdout)["warnings"] if HBM_WARNING in w]


def test_the_printed_env_carries_the_logical_core_setting_the_user_asked_for() -> None:
    """Qwen3-32B on trn2.48xlarge with NEURON_LOGICAL_NC_CONFIG=1 (128 logical cores): the settings
    printed omitted the variable, so pasting TP 16 x DP 8 was refused (128 cores on a 64-core instance).
    Now the env has it, and planned with nothing else (no LNC in the environment) it is accepted."""
    doc = recommend_cli("Qwen3-32B", "trn2.48xlarge", NEURON_LOGICAL_NC_CONFIG="1")
    assert doc["instance"]["neuron_cores"] == 128
    configs = doc["configurations"]
    assert all(c["env"]["NEURON_LOGICAL_NC_CONFIG"] == "1" for c in configs)
    assert all(c["tensor_parallel_size"] * c["data_parallel_size"] == 128 for c in configs)
    accepted_as_printed("Qwen3-32B", "trn2.48xlarge", doc)
    unasked = recommend_cli(
        "Qwen3-32B", "trn2.48xlarge", "--max-model-len", "4096"
    )  # the default LNC: not printed
    assert unasked["configurations"] and all(
        "NEURON_LOGICAL_NC_CONFIG" not in c["env"] for c in unasked["configurations"]
    )


@pytest.mark.parametrize(
    ("model", "instance"),
    [
        ("Llama-3.1-8B", "ml.inf2.xlarge"),
        ("Qwen3-8B", "inf2.48xlarge"),
        ("Mixtral-8x7B-v0.1", "trn2.48xlarge"),
    ],
)
def test_every_configuration_carries_the_plans_own_estimate(model: str, instance: str) -> None:
    """Each configuration's `estimate` has plan's keys, and planning its env gives that very estimate."""
    doc = recommend_cli(model, instance, "--max-model-len", "4096")
    assert all(set(c["estimate"]) >= KEYS for c in doc["configurations"])
    accepted_as_printed(model, instance, doc)


def test_the_workload_flags_reach_every_estimate_and_plan_agrees() -> None:
    flags = ("--input-len", "2000", "--output-len", "500", "--concurrency", "4")
    doc = recommend_cli("Llama-3.1-8B", "inf2.48xlarge", "--max-model-len", "4096", *flags)
    assert {(c["estimate"]["input_len"], c["estimate"]["output_len"]) for c in doc["configurations"]} == {
        (2000, 500)
    }
    accepted_as_printed("Llama-3.1-8B", "inf2.48xlarge", doc, *flags)
    # A workload longer than a length: plan refuses it, so does --recommend (pinned to that length).
    short = cli(
        "--model-config",
        str(DATA / "Llama-3.1-8B" / "config.json"),
        "--instance-type",
        "inf2.48xlarge",
        "--max-model-len",
        "2048",
        *flags,
    )
    planned = run(
        "--instance-type",
        "inf2.48xlarge",
        *flags,
        SM_VLLM_MODEL=str(DATA / "Llama-3.1-8B"),
        NEURONSERVE_DEVICE="neuron",
        SM_VLLM_MAX_MODEL_LEN="2048",
    )
    assert short.returncode == planned.returncode == 2
    assert short.stderr == planned.stderr and "--input-len 2000 + --output-len 500" in short.stderr


# Refusal parity: the plan of the user's settings on the instance (at TP 1: without a TP and without
# devices, plan first asks for one), and --recommend of the same settings.
PARITY = [
    # the model: MistralForCausalLM is not in lane 2.27's NxD Inference registry
    ("Mistral-7B-v0.3", "inf2.xlarge", {}),
    # the instance: not a Neuron instance type, and a family the lane does not run
    ("Qwen3-8B", "p4d.24xlarge", {}),
    ("Qwen3-8B", "trn3.48xlarge", {}),
    # the lane: 2.32 runs Trn2/Trn3 only
    ("Llama-3.1-8B", "inf2.xlarge", {"NEURONSERVE_STACK": "2.32"}),
    # Trainium3 on its lane: no HBM figures to plan with
    ("Qwen3-8B", "trn3.48xlarge", {"NEURONSERVE_STACK": "2.32"}),
    # a logical-core setting the instance does not have
    ("Qwen3-8B", "inf2.xlarge", {"NEURON_LOGICAL_NC_CONFIG": "2"}),
]


@pytest.mark.parametrize(("model", "instance", "env"), PARITY)
def test_what_plan_refuses_recommend_refuses_with_the_same_error(
    model: str, instance: str, env: dict[str, str]
) -> None:
    planned = run(
        "--instance-type",
        instance,
        SM_VLLM_MODEL=str(DATA / model),
        NEURONSERVE_DEVICE="neuron",
        SM_VLLM_TENSOR_PARALLEL_SIZE="1",
        **env,
    )
    recommended = cli("--model-config", str(DATA / model / "config.json"), "--instance-type", instance, **env)
    assert planned.returncode == recommended.returncode == 2, (planned.stderr, recommended.stderr)
    assert recommended.stderr == planned.stderr
    assert recommended.stdout == "" and "Traceback" not in recommended.stderr


def test_recommended_tp_degrees_are_the_valid_ones_plan_accepts() -> None:
    """TP degrees: every one recommended is a valid degree of the instance (instances.valid_tp_degrees,
    the degrees `plan` accepts) and plans; each degree plan refuses outright is absent."""
    doc = recommend_cli("Llama-3.2-1B", "inf2.48xlarge", "--max-model-len", "4096")
    facts = instances.instance_facts("inf2.48xlarge")
    offered = {c["tensor_parallel_size"]: c for c in doc["configurations"]}
    assert set(offered) <= set(instances.valid_tp_degrees(facts))
    for tp in range(1, facts.cores + 1):
        r = run(
            "--instance-type",
            "inf2.48xlarge",
            SM_VLLM_MODEL=str(DATA / "Llama-3.2-1B"),
            NEURONSERVE_DEVICE="neuron",
            SM_VLLM_TENSOR_PARALLEL_SIZE=str(tp),
            SM_VLLM_MAX_MODEL_LEN="4096",
        )
        if r.returncode != 0:
            assert tp not in offered, r.stderr
        elif tp in offered:
            plan_env("Llama-3.2-1B", "inf2.48xlarge", offered[tp]["env"])


def goal_of(goal: str) -> Callable[[dict[str, Any]], float]:
    def value(c: dict[str, Any]) -> float:
        est = c["estimate"]
        if goal == "throughput":
            return -float(est["instance_output_tokens_per_s"])
        if goal == "latency":
            return float(est["tpot_ms"])
        return float(c["usd_per_million_output_tokens"])

    return value


@pytest.mark.parametrize("goal", ["throughput", "latency", "cost"])
def test_a_goal_ranks_by_the_estimates_own_numbers(goal: str) -> None:
    doc = recommend_cli(
        "Qwen3-8B", "inf2.48xlarge", "--goal", goal, "--rank", "goal", "--max-model-len", "8192"
    )
    values = [goal_of(goal)(c) for c in doc["configurations"]]
    assert len(values) > 3 and values == sorted(values)
    assert doc["ranking"]["goal"] == goal and doc["ranking"]["by"] == "goal"
    accepted_as_printed("Qwen3-8B", "inf2.48xlarge", doc)
    # by length (the default): each length's configurations in the goal's order, the wanted length first
    by_length = recommend_cli("Qwen3-8B", "inf2.48xlarge", "--goal", goal, SM_VLLM_MAX_MODEL_LEN="8192")
    configs = by_length["configurations"]
    assert configs[0]["max_model_len"] == 8192
    for length in {c["max_model_len"] for c in configs}:
        group = [goal_of(goal)(c) for c in configs if c["max_model_len"] == length]
        assert group == sorted(group)


def test_the_goals_disagree_where_the_estimate_says_they_should() -> None:
    """Throughput and latency pick different first configurations on trn2 (big batches on few cores
    against small ones on many), each the best by its own measure among the other's choices."""
    thr = recommend_cli(
        "Llama-3.1-8B", "trn2.48xlarge", "--goal", "throughput", "--rank", "goal", "--max-model-len", "4096"
    )
    lat = recommend_cli(
        "Llama-3.1-8B", "trn2.48xlarge", "--goal", "latency", "--rank", "goal", "--max-model-len", "4096"
    )
    assert sorted(map(json.dumps, thr["configurations"])) == sorted(map(json.dumps, lat["configurations"]))
    best_thr, best_lat = thr["configurations"][0], lat["configurations"][0]
    assert best_thr["estimate"]["instance_output_tokens_per_s"] >= max(
        c["estimate"]["instance_output_tokens_per_s"] for c in lat["configurations"]
    )
    assert best_lat["estimate"]["tpot_ms"] <= min(c["estimate"]["tpot_ms"] for c in thr["configurations"])


def test_cost_is_the_tables_on_demand_price_over_the_estimated_tokens() -> None:
    doc = recommend_cli("Llama-3.1-8B", "inf2.48xlarge", "--goal", "cost", "--max-model-len", "4096")
    usd = prices.EC2["inf2.48xlarge"]["us-east-1"]
    assert doc["price"]["usd_per_hour"] == usd and doc["price"]["region"] == "us-east-1"
    assert prices.DATE in doc["price"]["source"]
    for c in doc["configurations"]:
        per_s = c["estimate"]["instance_output_tokens_per_s"]
        assert c["usd_per_million_output_tokens"] == pytest.approx(usd / (per_s * 3600) * 1e6, rel=1e-3)
    other = recommend_cli(
        "Llama-3.1-8B", "inf2.48xlarge", "--goal", "cost", "--max-model-len", "4096", AWS_REGION="eu-west-1"
    )
    assert other["price"]["usd_per_hour"] == prices.EC2["inf2.48xlarge"]["eu-west-1"]
    own = recommend_cli(
        "Llama-3.1-8B",
        "ml.inf2.48xlarge",
        "--goal",
        "cost",
        "--max-model-len",
        "4096",
        "--price-per-hour",
        "20",
    )
    assert own["price"] == {
        "usd_per_hour": 20.0,
        "instance": "ml.inf2.48xlarge",
        "region": None,
        "source": "--price-per-hour",
    }
    accepted_as_printed("Llama-3.1-8B", "inf2.48xlarge", doc)


@pytest.mark.parametrize(
    ("instance", "region", "why"),
    [
        ("ml.trn1.2xlarge", "us-east-1", "SageMaker no on-demand price for ml.trn1.2xlarge in us-east-1"),
        ("ml.inf2.xlarge", "eu-west-1", "SageMaker no on-demand price for ml.inf2.xlarge in eu-west-1"),
        ("trn2.48xlarge", "us-east-1", "no on-demand price for trn2.48xlarge in us-east-1"),
    ],
)
def test_cost_without_a_price_is_refused_naming_the_override(instance: str, region: str, why: str) -> None:
    r = cli(
        "--model-config",
        str(DATA / "Qwen3-8B" / "config.json"),
        "--instance-type",
        instance,
        "--goal",
        "cost",
        "--region",
        region,
    )
    assert r.returncode == 2 and why in r.stderr and "--price-per-hour" in r.stderr


def test_cost_on_a_sagemaker_type_uses_sagemakers_rate() -> None:
    doc = recommend_cli("Llama-3.1-8B", "ml.inf2.48xlarge", "--goal", "cost", "--max-model-len", "4096")
    usd = prices.SAGEMAKER["ml.inf2.48xlarge"]["us-east-1"]
    assert usd != prices.EC2["inf2.48xlarge"]["us-east-1"]
    assert doc["price"]["usd_per_hour"] == usd and doc["price"]["instance"] == "ml.inf2.48xlarge"
    assert "SageMaker" in doc["price"]["source"]
    for c in doc["configurations"]:
        per_s = c["estimate"]["instance_output_tokens_per_s"]
        assert c["usd_per_million_output_tokens"] == pytest.approx(usd / (per_s * 3600) * 1e6, rel=1e-3)


@pytest.mark.parametrize(("flag", "key"), [("--max-tpot-ms", "tpot_ms"), ("--max-ttft-ms", "ttft_ms")])
def test_a_latency_target_drops_what_misses_it_and_says_how_many(flag: str, key: str) -> None:
    base = ("--rank", "goal", "--max-model-len", "4096")
    every = recommend_cli("Llama-3.1-8B", "inf2.48xlarge", *base)["configurations"]
    values = sorted(c["estimate"][key] for c in every)
    target = values[len(values) // 2]
    doc = recommend_cli("Llama-3.1-8B", "inf2.48xlarge", *base, flag, f"{target:g}")
    kept = doc["configurations"]
    assert kept == [c for c in every if c["estimate"][key] <= target]
    missed = len(every) - len(kept)
    assert missed > 0
    assert {"count": missed, "reason": f"estimated {key} above {flag} {target:g}"} in doc["dropped"]
    accepted_as_printed("Llama-3.1-8B", "inf2.48xlarge", doc)
    text = cli(
        "--model-config",
        str(DATA / "Llama-3.1-8B" / "config.json"),
        "--instance-type",
        "inf2.48xlarge",
        *base,
        flag,
        f"{target:g}",
    )
    assert f"dropped:  {missed} x estimated {key} above {flag}" in text.stdout
    none = cli(
        "--json",
        "--model-config",
        str(DATA / "Llama-3.1-8B" / "config.json"),
        "--instance-type",
        "inf2.48xlarge",
        *base,
        flag,
        "0.001",
    )
    assert none.returncode == 2 and json.loads(none.stdout)["configurations"] == []


def test_a_model_that_fits_nowhere_on_the_instance() -> None:
    # Llama-3.3-70B: 141 GB of bf16 weights over 2 cores of 16 GiB.
    doc = recommend_cli("Llama-3.3-70B-Instruct", "inf2.xlarge", status=2)  # nothing fits: exit 2
    assert doc["configurations"] == []
    assert "nothing fits inf2.xlarge" in doc["why_none"] and "inf2.48xlarge" in doc["why_none"]
    text = cli(
        "--model-config",
        str(DATA / "Llama-3.3-70B-Instruct" / "config.json"),
        "--instance-type",
        "inf2.xlarge",
    )
    assert text.returncode == 2 and "nothing fits inf2.xlarge" in text.stdout


def test_recommend_needs_a_model_and_an_instance(tmp_path: Path) -> None:
    r = cli("--instance-type", "inf2.xlarge")
    assert r.returncode == 2 and "--model-config" in r.stderr
    r = cli("--model-config", str(DATA / "Qwen3-8B" / "config.json"))
    assert r.returncode == 2 and "--instance-type" in r.stderr
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    r = cli("--model-dir", str(tmp_path), "--instance-type", "inf2.xlarge")
    assert r.returncode == 2 and "hidden_size" in r.stderr


def test_text_output_gives_the_best_sm_vllm_lines() -> None:
    r = cli("--model-config", str(DATA / "Qwen2.5-7B" / "config.json"), "--instance-type", "trn1.32xlarge")
    assert r.returncode == 0, r.stderr
    best = r.stdout.split("best configuration:\n", 1)[1].splitlines()
    assert best[0].startswith("SM_VLLM_TENSOR_PARALLEL_SIZE=") and "SM_VLLM_MAX_NUM_SEQS=" in r.stdout
    assert "TTFT ms  TPOT ms" in r.stdout and "estimate: 1024 tokens in, 256 out per request" in r.stdout


@cache
def shape(name: str) -> memory.ModelShape:
    return memory.model_shape(json.loads((DATA / name / "config.json").read_text()))


@pytest.mark.parametrize("instance", ["ml.inf2.xlarge", "trn1.32xlarge"])
def test_the_best_configuration_serves_the_longest_length_it_can(instance: str) -> None:
    """Issue 29: ranked by throughput alone, Llama-3.1-8B's best was max_model_len 1024 everywhere. By
    length (the default): its max_position_embeddings (131072) where it fits, else the longest that does,
    said in a note."""
    doc = recommend_cli("Llama-3.1-8B", instance)
    lengths = [c["max_model_len"] for c in doc["configurations"]]
    assert lengths[0] == max(lengths)
    assert doc["ranking"]["max_model_len"] == 131072
    assert doc["ranking"]["max_model_len_from"] == "config.json max_position_embeddings"
    assert ("note" in doc) is (lengths[0] != 131072)


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
    assert (
        doc["configurations"][0]["max_model_len"] == wanted and doc["ranking"]["max_model_len_from"] == source
    )
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
    by_file = recommend_cli("Qwen3-8B", "inf2.48xlarge", "--max-model-len", "4096")
    r = cli(
        "--json",
        "--model-config",
        str(DATA / "Qwen3-8B"),
        "--instance-type",
        "inf2.48xlarge",
        "--max-model-len",
        "4096",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["configurations"] == by_file["configurations"]
    r = cli("--model-config", str(tmp_path), "--instance-type", "inf2.xlarge")
    assert r.returncode == 2 and f"--model-config={tmp_path}: a directory without a config.json" in r.stderr
    r = cli("--model-config", str(tmp_path / "config.json"), "--instance-type", "inf2.xlarge")
    assert r.returncode == 2 and r.stderr.strip().endswith(
        f"--model-config {tmp_path / 'config.json'}: no such file"
    )
    assert "Errno" not in r.stderr


def test_speculation_and_its_acceptance_length_reach_every_estimate_and_plan_agrees() -> None:
    """A speculative deployment: each configuration's estimate takes --acceptance-length, the text says
    what a step was taken to yield, and the printed env with the same flag plans to the same estimate."""
    eagle3 = {"method": "eagle3", "model": "org/head", "num_speculative_tokens": 3}
    spec = {
        "NEURONSERVE_STACK": "2.32",
        "SM_VLLM_SPECULATIVE_CONFIG": json.dumps(eagle3),
        "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"temperature": "0"}',
    }
    flags = ("--max-model-len", "2048", "--acceptance-length", "3.22")
    doc = recommend_cli("Llama-3.1-8B", "trn2.48xlarge", *flags, **spec)
    assert {c["estimate"]["speculation"]["tokens_per_step"] for c in doc["configurations"]} == {3.22}
    for c in (doc["configurations"][0], doc["configurations"][-1]):  # the user's settings, the printed on top
        planned = plan_env("Llama-3.1-8B", "trn2.48xlarge", {**spec, **c["env"]}, *flags[2:])
        assert planned["estimate"] == c["estimate"]
    config = str(DATA / "Llama-3.1-8B" / "config.json")
    text = cli("--model-config", config, "--instance-type", "trn2.48xlarge", *flags, **spec).stdout
    said = "speculation: 3.22 tokens a step from 3 draft token(s) verified (num_speculative_tokens 3); "
    assert said + "--acceptance-length" in text
