"""Issue 42 item 10: speculative decoding runs as asked or is refused; typed as a user types it. The
contract tier runs the same configurations through each lane's vLLM, plugin and NxD Inference
(tests/contract/cases.py issue_42_cases)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.support.typed import model_dir, neuronserve

LLAMA_8B = model_dir("Llama-3.1-8B")
DRAFT = model_dir("Llama-3.2-1B")
BASE = {"SM_VLLM_MAX_MODEL_LEN": "4096", "SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "SM_VLLM_MAX_NUM_SEQS": "4"}
INF2 = ["plan", "--instance-type", "inf2.48xlarge"]
PLUGIN = {"2.27": "vllm-neuron 0.2.2+lts", "2.28": "vllm-neuron 0.4.1"}


def spec(**fields: object) -> str:
    return json.dumps({"num_speculative_tokens": 4, **fields})


def run(lane: str, speculative: str, model: str = LLAMA_8B, **extra: str) -> tuple[int, str, str]:
    env = {
        **BASE,
        "SM_VLLM_MODEL": model,
        "NEURONSERVE_STACK": lane,
        "SM_VLLM_SPECULATIVE_CONFIG": speculative,
    }
    proc = neuronserve(INF2, {**env, **extra})
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("lane", ["2.27", "2.28"])
@pytest.mark.parametrize(
    "speculative", [spec(method="eagle3", model=DRAFT), spec(method="ngram", prompt_lookup_max=4)]
)
def test_a_method_the_plugin_does_not_run_as_asked_is_refused(lane: str, speculative: str) -> None:
    code, out, err = run(lane, speculative)
    method = json.loads(speculative)["method"]
    assert code == 2, out
    assert f'SM_VLLM_SPECULATIVE_CONFIG: "method": "{method}" is not run as asked on {PLUGIN[lane]}' in err
    assert 'turns on NxD Inference\'s EAGLE path only for "eagle"' in err
    assert 'the method it runs is "eagle"' in err


@pytest.mark.parametrize("lane", ["2.27", "2.28"])
@pytest.mark.parametrize("speculative", [spec(model=DRAFT), spec(method="medusa", model=DRAFT)])
def test_a_plain_draft_model_is_refused_as_vllm_refuses_it(lane: str, speculative: str) -> None:
    """vLLM detects "draft_model" for a draft whose name and config say no other method, and raises
    NotImplementedError (vLLM 0.11.0 config/speculative.py:348-353, 0.13.0 :379-384)."""
    code, out, err = run(lane, speculative)
    assert code == 2, out
    assert 'method "draft_model" (what vLLM detects for this draft) is not run as asked' in err
    assert "Speculative decoding with draft model is not supported yet" in err


def test_an_eagle_draft_named_as_vllm_detects_it_plans(tmp_path: Path) -> None:
    draft = tmp_path / "EAGLE-LLaMA3-Instruct-8B"
    shutil.copytree(DRAFT, draft)
    code, out, err = run("2.27", spec(model=str(draft)))
    assert code == 0, err
    assert "--speculative-config" in out


@pytest.mark.parametrize(("lane", "refused"), [("2.27", True), ("2.28", False)])
def test_a_draft_the_target_s_config_class_cannot_describe_is_refused(lane: str, refused: bool) -> None:
    """0.2.2+lts builds the draft's config with the target's class (loader :291-295): a Llama EAGLE draft on
    a Mixtral target lacks num_local_experts; 0.4.1 builds it with the draft's own class (:355-409)."""
    mixtral = model_dir("Mixtral-8x7B-v0.1")
    code, out, err = run(
        lane,
        spec(method="eagle", model=DRAFT),
        mixtral,
        NEURONSERVE_FIT_CHECK="off",
        SM_VLLM_TENSOR_PARALLEL_SIZE="24",
    )
    if refused:
        assert code == 2, out
        assert "cannot be described by MixtralForCausalLM's config class" in err
        assert "num_local_experts, num_experts_per_tok" in err
    else:
        assert code == 0, err


@pytest.mark.parametrize("lane", ["2.27", "2.28"])
def test_eagle_with_prefix_caching_is_planned_with_the_reason_and_eagle3_refused(lane: str) -> None:
    prefix = {"SM_VLLM_ENABLE_PREFIX_CACHING": "true", "SM_VLLM_BLOCK_SIZE": "32"}
    code, out, err = run(lane, spec(method="eagle", model=DRAFT), **prefix)
    assert code == 0, err
    assert "with prefix caching: planned, as" in out and "its own context-encoding path" in out
    code, out, err = run(lane, spec(method="eagle", model=DRAFT), **prefix, SM_NEURON_IS_EAGLE3="true")
    assert code == 2, out
    assert "We do not yet support integration of EAGLE3 and prefix caching" in err
