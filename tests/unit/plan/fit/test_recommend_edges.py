"""The edge cases of `plan --recommend` (plan/fit/recommend.py), in process (mutation testing cannot see
into the CLI subprocesses of test_recommend.py): the document in full for one configuration, the candidate
lengths at their boundaries, a pinned --max-num-seqs, the headroom (a batch plan warns about is not
recommended), which refusal of the plan is raised, the goals' keys and ties, the filters, the printed env,
the price table, and why_none's exact text. The planner is build_plan itself, on hand-made host facts.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest
from tests.unit.plan.fit.test_recommend import DATA, cli, shape

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import instances, memory, recommend
from neuronserve.plan.fit.instances import GIB
from neuronserve.types import LaunchPlan

BF16 = memory.Precision(2, 2)
OVERHEAD = memory.DEFAULT_OVERHEAD_BYTES  # 1.5 GiB per core
TAIL = "(Overhead assumed 1.5 GiB per core: NEURONSERVE_HBM_OVERHEAD_GIB, docs/FIT.md)"


def planner(name: str, instance: str, **env: str) -> recommend.Planner:
    """build_plan of the candidate's settings on `instance`, the model's config.json as the host's /m."""
    config = json.loads((DATA / name / "config.json").read_text())
    host = HostFacts(python="py", paths={"/m": ModelFacts("dir", config, "d" * 64)})
    base = {
        "SM_VLLM_MODEL": "/m",
        "NEURONSERVE_DEVICE": "neuron",
        "NEURONSERVE_INSTANCE_TYPE": instance,
        **env,
    }

    def plan_of(candidate: Mapping[str, str]) -> LaunchPlan:
        return build_plan(parse_settings({**base, **candidate}), host)

    return plan_of


def document(name: str, instance: str, **pins: Any) -> dict[str, Any]:
    request = recommend.Request(
        name,
        memory.Model(shape(name), BF16),
        instances.instance_facts(instance),
        OVERHEAD,
        "bfloat16",
        **pins,
    )
    return recommend.document(request, planner(name, instance))


def why(name: str, instance: str, **pins: int) -> str:
    """why_none as `plan --recommend --json` gives it (the document, bf16, default overhead)."""
    doc = document(name, instance, **pins)
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
    assert recommend.lengths(s, None, 3000) == sorted({*expected, 3000})


def test_the_json_document_in_full_for_llama_8b_on_inf2_xlarge_at_4096() -> None:
    """Llama-3.1-8B on inf2.xlarge at 4096 tokens: TP 1 cannot hold the weights; TP 2 holds 16 sequences
    at 81 % (32 would be 106 %: refused). The memory and the estimate are the plan's for that env, which
    is the one a user pastes (prefix caching off, as the estimate assumes)."""
    doc = document("Llama-3.1-8B", "ml.inf2.xlarge", max_model_len=4096)
    env = {
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
        "SM_VLLM_DATA_PARALLEL_SIZE": "1",
        "SM_VLLM_MAX_MODEL_LEN": "4096",
        "SM_VLLM_MAX_NUM_SEQS": "16",
        "SM_VLLM_DTYPE": "bfloat16",
        "SM_VLLM_ENABLE_PREFIX_CACHING": "false",
    }
    plan = planner("Llama-3.1-8B", "ml.inf2.xlarge")(env)
    s = shape("Llama-3.1-8B")
    assert doc == {
        "instance": instances.instance_facts("ml.inf2.xlarge").as_json(),
        "model": {"name": "Llama-3.1-8B", **s.as_json(), "parameters": 8_030_261_248, "dtype": "bfloat16"},
        "ranking": {
            "by": "length",
            "goal": "throughput",
            "max_model_len": 4096,
            "max_model_len_from": "--max-model-len",
        },
        "configurations": [
            {
                "tensor_parallel_size": 2,
                "data_parallel_size": 1,
                "max_model_len": 4096,
                "max_num_seqs": 16,
                "memory": plan.memory,
                "estimate": plan.estimate,
                "usd_per_million_output_tokens": None,
                "env": env,
            }
        ],
        "dropped": [{"count": 1, "reason": recommend.HEADROOM}],  # TP 1
    }
    assert plan.memory is not None and plan.memory["kv_bytes_per_core"] == 16 * 268_435_456
    assert plan.memory["utilization"] == 0.8112


def test_the_document_reports_the_checkpoint_parameter_count_when_known() -> None:
    """With safetensors headers (--model-dir) the document's `parameters` is the checkpoint's own count,
    not the one the config implies."""
    model = memory.Model(shape("Llama-3.2-1B"), BF16, 1_234_567_890)
    request = recommend.Request("m", model, instances.instance_facts("inf2.xlarge"), OVERHEAD, "bfloat16")
    doc = recommend.document(request, planner("Llama-3.2-1B", "inf2.xlarge"))
    assert doc["model"]["parameters"] == 1_234_567_890


def test_a_pinned_max_num_seqs_is_the_only_batch_tried() -> None:
    """--max-num-seqs 3 (not a power of two): the one configuration uses exactly 3 sequences, at the pinned
    length, and its env says so."""
    doc = document("Llama-3.1-8B", "inf2.xlarge", max_model_len=4096, max_num_seqs=3)
    [config] = doc["configurations"]
    assert (config["tensor_parallel_size"], config["max_model_len"], config["max_num_seqs"]) == (2, 4096, 3)
    assert config["env"]["SM_VLLM_MAX_NUM_SEQS"] == "3"
    assert config["memory"]["kv_bytes_per_core"] == 3 * 268_435_456


def test_a_batch_plan_warns_about_is_not_recommended() -> None:
    """Llama-3.3-70B on trn1.32xlarge at 131072 tokens: TP 16 holds one sequence at 93 % (plan warns), so
    that (TP, length) is dropped for the headroom; TP 32 keeps its largest batch below 90 %."""
    doc = document("Llama-3.3-70B-Instruct", "trn1.32xlarge", max_model_len=131072)
    assert [(c["tensor_parallel_size"], c["max_num_seqs"]) for c in doc["configurations"]] == [(32, 1)]
    assert doc["configurations"][0]["memory"]["utilization"] <= memory.WARN_UTILIZATION
    two = planner("Llama-3.3-70B-Instruct", "trn1.32xlarge")(
        recommend.candidate_env(32, 1, 131072, 2, dtype="bfloat16", lnc=None)
    )
    assert two.memory is not None and two.memory["utilization"] > memory.WARN_UTILIZATION
    assert {"count": 5, "reason": recommend.HEADROOM} in doc["dropped"]  # TP 1, 2, 4, 8 and 16


def test_the_plans_most_frequent_refusal_is_the_one_raised() -> None:
    dropped = recommend.Dropped()
    rare, common = ConfigError("rare", ("A",)), ConfigError("common", ("B",))
    dropped.add(recommend.HEADROOM)
    dropped.add(recommend.HEADROOM)
    dropped.add(recommend.HEADROOM)
    dropped.add("rare", rare)
    dropped.add("common", common)
    dropped.add("common", ConfigError("common", ("C",)))
    assert recommend.refusal(dropped) is common  # the first error of the most frequent message
    assert recommend.refusal(recommend.Dropped()) is None
    only_hbm = recommend.Dropped()
    only_hbm.add(recommend.HEADROOM)
    assert recommend.refusal(only_hbm) is None
    assert dropped.as_json()[0] == {"count": 3, "reason": recommend.HEADROOM}


def test_an_hbm_refusal_is_headroom_not_the_plans_error() -> None:
    """A candidate the fit check refuses (its error names NEURONSERVE_FIT_CHECK) counts as the headroom;
    the document then says nothing fits rather than raising the HBM error of one candidate."""
    doc = document("Llama-3.3-70B-Instruct", "inf2.xlarge")
    assert doc["configurations"] == [] and "nothing fits inf2.xlarge" in doc["why_none"]
    assert [d["reason"] for d in doc["dropped"]] == [recommend.HEADROOM]


def config(
    tokens: float, tpot: float, tp: int = 1, ttft: float = 100.0, usd: float | None = None
) -> recommend.Configuration:
    est = {"instance_output_tokens_per_s": tokens, "tpot_ms": tpot, "ttft_ms": ttft}
    return recommend.Configuration(tp, 1, 4096, 8, {}, {}, est, usd)


def test_goal_keys_and_their_ties() -> None:
    a, b, c = config(100, 20, tp=2), config(200, 30), config(100, 20, tp=1)
    assert recommend.ranked([a, b, c], "goal", 4096, "throughput") == [b, c, a]
    assert recommend.ranked([a, b, c], "goal", 4096, "latency") == [c, a, b]
    priced = [dataclasses.replace(x, usd_per_hour=10.0) for x in (a, b, c)]
    assert recommend.ranked(priced, "goal", 4096, "cost") == [priced[1], priced[2], priced[0]]
    assert recommend.ranked([a, priced[1]], "goal", 4096, "cost") == [priced[1], a]  # unpriced last
    assert priced[1].usd_per_million_output_tokens == pytest.approx(10 / (200 * 3600) * 1e6)
    assert config(0, 1, usd=1.0).usd_per_million_output_tokens is None


def test_filters_drop_what_misses_each_target() -> None:
    fast, slow_tpot, slow_ttft = config(1, 10, ttft=50), config(1, 40, ttft=50), config(1, 10, ttft=900)
    dropped = recommend.Dropped()
    goal = recommend.Goal("throughput", max_tpot_ms=20, max_ttft_ms=500)
    assert recommend.filtered([fast, slow_tpot, slow_ttft], goal, dropped) == [fast]
    assert dropped.as_json() == [
        {"count": 1, "reason": "estimated tpot_ms above --max-tpot-ms 20"},
        {"count": 1, "reason": "estimated ttft_ms above --max-ttft-ms 500"},
    ]
    at_limit = config(1, 20, ttft=500)
    assert recommend.filtered([at_limit], goal, recommend.Dropped()) == [at_limit]


def test_the_printed_env_names_the_logical_core_setting_only_when_given() -> None:
    assert "NEURON_LOGICAL_NC_CONFIG" not in recommend.candidate_env(
        2, 1, 4096, 8, dtype="bfloat16", lnc=None
    )
    assert (
        recommend.candidate_env(2, 1, 4096, 8, dtype="bfloat16", lnc="1")["NEURON_LOGICAL_NC_CONFIG"] == "1"
    )


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


def test_no_recommendation_for_an_instance_the_lane_cannot_run() -> None:
    config = str(DATA / "Llama-3.1-8B" / "config.json")
    r = cli("--model-config", config, "--instance-type", "inf2.xlarge", NEURONSERVE_STACK="2.32")
    assert r.returncode == 2 and "use lane 2.28" in r.stderr and "Traceback" not in r.stderr
    ok = cli("--json", "--model-config", config, "--instance-type", "trn2.3xlarge", NEURONSERVE_STACK="2.32")
    assert ok.returncode == 0, ok.stderr
