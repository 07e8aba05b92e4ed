"""plan/fit/estimate_plan.py: the plan's own graph (TP, DP, sampling, buckets, speculation) and workload
read into the speed estimate, through build_plan."""

from __future__ import annotations

import json

import pytest
from tests.support.golden_plans import LAPTOP_VERSIONS, MODELS, TABLES

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import estimate, instances, memory
from neuronserve.plan.fit.estimate import Workload
from neuronserve.plan.fit.estimate_plan import compiled_of, plan_estimate
from neuronserve.plan.resolution import Resolution


def _plan(env: dict[str, str], workload: Workload | None = None) -> dict[str, object] | None:
    config = json.loads((MODELS / "Llama-3.1-8B" / "config.json").read_text())
    facts = HostFacts(
        python="py",
        cores_source="test",
        paths={"/m": ModelFacts("dir", config, "x", None)},
        option_tables=TABLES,
        versions=LAPTOP_VERSIONS,
    )
    base = {
        "SM_VLLM_MODEL": "/m",
        "NEURONSERVE_INSTANCE_TYPE": "inf2.48xlarge",
        "SM_VLLM_MAX_MODEL_LEN": "4096",
    }
    return build_plan(parse_settings({**base, **env}, device="neuron"), facts, workload=workload).estimate


def test_the_plan_reads_its_own_graph_dp_and_sampling() -> None:
    one = _plan({"SM_VLLM_TENSOR_PARALLEL_SIZE": "8"})
    three = _plan({"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "SM_VLLM_DATA_PARALLEL_SIZE": "3"})
    cpu = _plan({"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": "null"})
    assert one and three and cpu
    assert three["instance_output_tokens_per_s"] == pytest.approx(
        3 * one["instance_output_tokens_per_s"], rel=0.01
    )
    assert cpu["tpot_ms"] > one["tpot_ms"]  # type: ignore[operator]


def test_the_plan_takes_the_workload_and_refuses_one_longer_than_the_model() -> None:
    est = _plan({"SM_VLLM_TENSOR_PARALLEL_SIZE": "8"}, Workload(1500, 250, 1))
    assert est and (est["input_len"], est["output_len"], est["concurrency"]) == (1500, 250, 1)
    with pytest.raises(ConfigError, match="--input-len 4000 \\+ --output-len 250 exceeds max_model_len 4096"):
        _plan({"SM_VLLM_TENSOR_PARALLEL_SIZE": "8"}, Workload(4000, 250, 1))


def test_no_estimate_without_an_instance_or_on_cpu() -> None:
    assert _plan({"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "NEURONSERVE_INSTANCE_TYPE": ""}) is None
    assert _plan({"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "NEURONSERVE_FIT_CHECK": "off"}) is None


def test_compiled_of_reads_buckets_chunks_and_speculation() -> None:
    res = Resolution.of(
        parse_settings({"SM_VLLM_SPECULATIVE_CONFIG": '{"model": "/d", "num_speculative_tokens": 4}'})
    )
    graph = {
        "tp": 8,
        "max_model_len": 4096,
        "max_num_seqs": 4,
        "override": {"context_encoding_buckets": [512, 2048]},
    }
    c = compiled_of(graph, 2, res)
    assert (c.tp, c.dp, c.max_num_seqs, c.context_buckets, c.speculative_tokens) == (8, 2, 4, (512, 2048), 4)
    chunked = compiled_of({**graph, "chunked_prefill": True, "max_num_batched_tokens": 1024}, 1, res)
    assert chunked.context_buckets == (1024,)
    cpu = compiled_of(
        {**graph, "override": {"on_device_sampling_config": None}}, 1, Resolution.of(parse_settings({}))
    )
    assert cpu.cpu_sampling and cpu.speculative_tokens == 0


def test_an_eagle_head_with_no_local_config_is_charged_as_its_target_implies() -> None:
    """A hub EAGLE3 head (no config.json here): the plan's estimate carries its draft steps and its
    prefill, where it used to carry only the target's."""
    trn2 = {
        "NEURONSERVE_INSTANCE_TYPE": "trn2.48xlarge",
        "NEURONSERVE_STACK": "2.32",
        "SM_VLLM_MAX_MODEL_LEN": "2048",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "8",
        "SM_VLLM_MAX_NUM_SEQS": "2",
        "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"temperature": "0"}',
    }
    spec = '{"model": "org/EAGLE3-head", "num_speculative_tokens": 3, "method": "eagle3"}'
    plain = _plan(trn2)
    headed = _plan({**trn2, "SM_VLLM_SPECULATIVE_CONFIG": spec})
    assert plain and headed
    assert headed["ttft_ms"] > plain["ttft_ms"]  # type: ignore[operator]
    target = memory.Model(
        memory.model_shape(json.loads((MODELS / "Llama-3.1-8B" / "config.json").read_text())),
        memory.Precision(2, 2),
    )
    res = Resolution.of(parse_settings({"SM_VLLM_SPECULATIVE_CONFIG": spec}))
    graph = {"tp": 8, "max_model_len": 2048, "max_num_seqs": 2, "override": {}}
    trn2_facts = instances.instance_facts("trn2.48xlarge")
    alone = estimate.estimate([target], trn2_facts, compiled_of(graph, 1, res), Workload())
    assert headed["decode_step_ms"] > 1.1 * alone.decode_step_ms  # type: ignore[operator]


def test_nxdi_lanes_verify_one_draft_fewer_than_num_speculative_tokens() -> None:
    """Lanes 2.27/2.28 hand num_speculative_tokens to NxD Inference as speculation_length, which counts
    the target's own token (vllm-neuron 0.2.2 neuronx_distributed_model_loader.py:789-793, NxD Inference
    0.7.14366 model_base.py:2597-2681): k = 4 verifies 3 drafts; lane 2.32's vLLM proposer verifies 4."""
    spec = '{"method": "eagle", "model": "org/eagle-head", "num_speculative_tokens": 4}'
    nxdi = _plan({"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "SM_VLLM_SPECULATIVE_CONFIG": spec})
    assert nxdi and nxdi["speculation"] == {
        "num_speculative_tokens": 4,
        "drafts_verified": 3,
        "tokens_per_step": 1 + 3 * estimate.ACCEPTED_FRACTION,
        "tokens_per_step_basis": "assumed: 1 + 0.6 x drafts verified (--acceptance-length to set it)",
    }
    with pytest.raises(ConfigError, match="fused speculation verifies 3 draft token"):
        _plan(
            {"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "SM_VLLM_SPECULATIVE_CONFIG": spec},
            Workload(acceptance_length=4.5),
        )


def test_a_chip_without_constants_gets_no_estimate_rather_than_another_chips() -> None:
    """Trainium3 (NeuronCore-v4) has no published serving measurement to fit constants on: a row for it
    must give no estimate, never one made of Inferentia2's figures."""
    from dataclasses import replace

    target = memory.Model(
        memory.model_shape(json.loads((MODELS / "Llama-3.1-8B" / "config.json").read_text())),
        memory.Precision(2, 2),
    )
    graph = {"tp": 8, "max_model_len": 4096, "max_num_seqs": 4, "override": {}}
    res = Resolution.of(parse_settings({}))
    trn2 = instances.instance_facts("trn2.48xlarge")
    assert plan_estimate([target], trn2, graph, dp=1, res=res, workload=None) is not None
    trn3 = replace(trn2, name="trn3.example", chip="Trainium3")
    assert not estimate.covers(trn3)
    assert plan_estimate([target], trn3, graph, dp=1, res=res, workload=None) is None
