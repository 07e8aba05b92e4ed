"""Guards of plan/lanes/nxdi/guards.py, each both ways: refused where vllm-neuron 0.2.2+lts (or vLLM
0.11.0) ignores or rejects the setting, and the neighbour that works plans.
"""

from __future__ import annotations

import pytest
from tests.support.builders import (
    LLAMA,
    additional,
    facts,
    llama_facts,
    llama_plan,
    llama_refusal,
    plan,
)

from neuronserve.plan.facts import ModelFacts

QUANT_FIX = (
    "set SM_NEURON_QUANTIZED=true, SM_NEURON_QUANTIZED_CHECKPOINTS_PATH=<dir>, "
    "SM_NEURON_QUANTIZATION_TYPE=per_tensor_symmetric|per_channel_symmetric, "
    "SM_NEURON_QUANTIZATION_DTYPE=int8|f8e4m3"
)


@pytest.mark.parametrize(
    ("env", "extra", "origin", "method"),
    [
        ({"SM_VLLM_QUANTIZATION": "neuron_quant"}, (), "SM_VLLM_QUANTIZATION", "neuron_quant"),
        ({"SM_VLLM_QUANTIZATION": "fbgemm_fp8"}, (), "SM_VLLM_QUANTIZATION", "fbgemm_fp8"),
        ({}, ("--quantization", "fbgemm_fp8"), "-- --quantization", "fbgemm_fp8"),
        ({}, ("--quantization=neuron_quant",), "-- --quantization", "neuron_quant"),
    ],
)
def test_vllm_quantization_is_refused_on_the_plugin(
    env: dict[str, str], extra: tuple[str, ...], origin: str, method: str
) -> None:
    err = llama_refusal(env, extra=extra)
    assert str(err) == (
        f"{origin}={method}: vllm-neuron 0.2.2+lts never reads vLLM's quantization setting (NxD Inference "
        f"would compile an unquantized graph); unset {origin} and quantize through the override: {QUANT_FIX}"
    )
    assert err.variables == (origin, "SM_NEURON_QUANTIZED")


def test_quantization_through_the_override_plans() -> None:
    env = {
        "SM_NEURON_QUANTIZED": "true",
        "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "/q",
        "SM_NEURON_QUANTIZATION_TYPE": "per_channel_symmetric",
        "SM_NEURON_QUANTIZATION_DTYPE": "int8",
    }
    doc = additional(llama_plan(env))["override_neuron_config"]
    assert doc == {
        "quantized": True,
        "quantized_checkpoints_path": "/q",
        "quantization_type": "per_channel_symmetric",
        "quantization_dtype": "int8",
    }


@pytest.mark.parametrize("path", [None, '""', "null"])
def test_quantized_without_a_checkpoint_path_is_refused_naming_the_path_variable(path: str | None) -> None:
    """The loader fills a missing quantized_checkpoints_path with None (vllm-neuron 0.2.2+lts
    worker/neuronx_distributed_model_loader.py:888-901) and NxD Inference's NeuronConfig asserts
    "quantized_checkpoints_path is required" (models/config.py:200-203), after the download: refused
    before. An empty path names no directory NxD Inference could write the quantized weights to."""
    env = {"SM_NEURON_QUANTIZED": "true", "SM_NEURON_QUANTIZATION_DTYPE": "int8"}
    if path is not None:
        env["SM_NEURON_QUANTIZED_CHECKPOINTS_PATH"] = path
    err = llama_refusal(env)
    assert str(err).startswith(
        "SM_NEURON_QUANTIZED=true needs a quantized checkpoint directory: set "
        "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH"
    )
    assert err.variables == ("SM_NEURON_QUANTIZED", "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH")
    llama_plan({**env, "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "/q"})  # the neighbour plans


def test_vllm_quantization_still_reaches_the_cpu_engine() -> None:
    p = plan({"SM_VLLM_MODEL": "org/m", "SM_VLLM_QUANTIZATION": "fp8"}, facts(None), device="cpu")
    assert p.argv[p.argv.index("--quantization") + 1] == "fp8"


@pytest.mark.parametrize(
    ("env", "extra", "shown", "what"),
    [
        (
            {"SM_VLLM_PIPELINE_PARALLEL_SIZE": "2"},
            (),
            "SM_VLLM_PIPELINE_PARALLEL_SIZE=2",
            "pipeline parallelism",
        ),
        ({}, ("--pipeline-parallel-size", "2"), "-- --pipeline-parallel-size=2", "pipeline parallelism"),
    ],
)
def test_pipeline_parallel_and_multi_node_are_refused_naming_the_fork(
    env: dict[str, str], extra: tuple[str, ...], shown: str, what: str
) -> None:
    err = llama_refusal(env, extra=extra)
    assert str(err) == (
        f"{shown}: {what} is not supported by vllm-neuron 0.2.2+lts (multi-node serving exists only on AWS's "
        "fork of the vLLM Neuron integration (aws-neuron/upstreaming-to-vllm, branch "
        "neuron-2.23-vllm-v0.7.2), not in vllm-neuron 0.2.2+lts): unset "
        f"{shown.split('=', maxsplit=1)[0]} (or set it to 1) and shard with SM_VLLM_TENSOR_PARALLEL_SIZE on "
        "one instance"
    )


@pytest.mark.parametrize("env", [{"SM_VLLM_PIPELINE_PARALLEL_SIZE": "1"}])
def test_one_stage_and_one_node_plan(env: dict[str, str]) -> None:
    llama_plan(env)


@pytest.mark.parametrize("nodes", ["1", "2", "two"])
def test_nnodes_is_no_option_of_the_2_27_vllm(nodes: str) -> None:
    """vLLM 0.11.0 has no --nnodes (src/neuronserve/data/vllm-0.11.0-cli.json): any SM_VLLM_NNODES, 1
    included, would stop the engine at start, so the flag check refuses it first (plan/flagcheck.py)."""
    err = llama_refusal({"SM_VLLM_NNODES": nodes})
    assert str(err).startswith("SM_VLLM_NNODES is not an engine setting: vLLM 0.11.0 has no --nnodes")


DRAFT = {"/d": ModelFacts("dir", LLAMA, "e" * 64, True)}


def spec(tokens: str) -> dict[str, str]:
    cfg = f'{{"method": "eagle", "model": "/d", "num_speculative_tokens": {tokens}}}'
    return {"SM_VLLM_SPECULATIVE_CONFIG": cfg}


@pytest.mark.parametrize("tokens", ['"abc"', "2.5", "true", "0", "-1", '"4"'])
def test_a_non_integer_speculative_field_is_a_clear_error(tokens: str) -> None:
    """ "abc" crashed `neuronserve plan` with a ValueError traceback (launch.launch_keys' int())."""
    err = llama_refusal(spec(tokens), llama_facts(2, paths=DRAFT))
    assert str(err) == (
        f"SM_VLLM_SPECULATIVE_CONFIG: num_speculative_tokens={tokens} must be a positive integer "
        "(a JSON number such as 4)"
    )
    assert err.variables == ("SM_VLLM_SPECULATIVE_CONFIG",)


def test_other_speculative_number_fields_are_checked_too() -> None:
    env = {
        "SM_VLLM_SPECULATIVE_CONFIG": '{"method": "eagle", "model": "/d", "draft_tensor_parallel_size": "x"}'
    }
    assert 'draft_tensor_parallel_size="x"' in str(llama_refusal(env, llama_facts(2, paths=DRAFT)))


@pytest.mark.parametrize("model", ["5", '""', '"  "', "[1]", '{"a": 1}', "true"])
def test_a_draft_model_that_is_no_string_is_refused(model: str) -> None:
    """It was passed to vLLM as given (`"model": 5`), with nothing staged."""
    env = {
        "SM_VLLM_SPECULATIVE_CONFIG": f'{{"method": "eagle", "model": {model}, "num_speculative_tokens": 4}}'
    }
    err = llama_refusal(env, llama_facts(2, paths=DRAFT))
    assert "must name the draft model as a string" in str(err)
    assert err.variables == ("SM_VLLM_SPECULATIVE_CONFIG",)


@pytest.mark.parametrize("model", ['"/d"', "null"])
def test_a_draft_model_as_a_path_or_none_plans(model: str) -> None:
    env = {
        "SM_VLLM_SPECULATIVE_CONFIG": f'{{"method": "eagle", "model": {model}, "num_speculative_tokens": 4}}'
    }
    llama_plan(env, llama_facts(2, paths=DRAFT))


def test_a_speculative_config_that_is_json_but_no_object_is_refused() -> None:
    err = llama_refusal({"SM_VLLM_SPECULATIVE_CONFIG": "[4]"})
    assert str(err) == "SM_VLLM_SPECULATIVE_CONFIG must be a JSON object"


def test_an_integer_speculative_config_plans_with_the_length_edge_warning() -> None:
    p = llama_plan(spec("4"), llama_facts(2, paths=DRAFT))
    assert (
        "speculative decoding with num_speculative_tokens=4: a request whose prompt + max_tokens "
        "exceeds 2044 (max_model_len 2048 - 4) may fail in the engine near the maximum length "
        "(vllm-neuron 0.2.2+lts writes 4 slots past the last position): keep prompt + max_tokens <= 2044, "
        "or raise SM_VLLM_MAX_MODEL_LEN"
    ) in p.warnings
    assert not [w for w in llama_plan({}).warnings if "speculative" in w]
