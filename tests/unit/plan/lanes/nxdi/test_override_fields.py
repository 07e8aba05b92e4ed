"""Issue 42 item 3: override keys are checked against the lane's own NeuronConfig fields (read from its NxD
Inference source by scripts/neuron-config-fields), and an unknown key is refused naming the closest field;
typed as a user types it. The contract tier (tests/contract/test_override_fields.py) shows that the lane's
NxD Inference reads every accepted field."""

from __future__ import annotations

import json
import subprocess

import pytest
from tests.contract import sources
from tests.support.typed import ROOT, model_dir, neuronserve

from neuronserve.plan.lanes.nxdi import override_fields
from neuronserve.plan.lanes.nxdi.profiles import V0_2, V0_4

LLAMA = {
    "SM_VLLM_MODEL": model_dir("Llama-3.1-8B"),
    "SM_VLLM_MAX_MODEL_LEN": "4096",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "8",
}
INF2 = ["plan", "--instance-type", "inf2.48xlarge"]
TYPO = {"sequence_paralel_enabled": True}


@pytest.mark.parametrize(
    ("env", "var"),
    [
        ({"SM_NEURON_SEQUENCE_PARALEL_ENABLED": "true"}, "SM_NEURON_SEQUENCE_PARALEL_ENABLED"),
        ({"SM_NEURON_OVERRIDE_CONFIG": json.dumps(TYPO)}, "SM_NEURON_OVERRIDE_CONFIG"),
        ({"SM_VLLM_OVERRIDE_NEURON_CONFIG": json.dumps(TYPO)}, "SM_VLLM_OVERRIDE_NEURON_CONFIG"),
        (
            {"SM_VLLM_ADDITIONAL_CONFIG": json.dumps({"override_neuron_config": TYPO})},
            "SM_VLLM_ADDITIONAL_CONFIG",
        ),
    ],
)
@pytest.mark.parametrize("lane", ["2.27", "2.28"])
def test_a_misspelt_key_is_refused_with_the_closest_field(env: dict[str, str], var: str, lane: str) -> None:
    proc = neuronserve(INF2, {**LLAMA, **env, "NEURONSERVE_STACK": lane})
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.startswith(f"neuronserve plan: error: {var} sets sequence_paralel_enabled, "), (
        proc.stderr
    )
    assert "Unexpected keyword arguments" in proc.stderr
    assert "did you mean sequence_parallel_enabled?" in proc.stderr
    if var.startswith("SM_NEURON_SEQ"):
        assert "set SM_NEURON_SEQUENCE_PARALLEL_ENABLED instead" in proc.stderr


def test_the_spelt_field_plans() -> None:
    proc = neuronserve([*INF2, "--json"], {**LLAMA, "SM_NEURON_SEQUENCE_PARALLEL_ENABLED": "true"})
    assert proc.returncode == 0, proc.stderr
    assert '\\"sequence_parallel_enabled\\":true' in proc.stdout


def test_the_field_list_is_the_model_s_config_class() -> None:
    """capacity_factor is MoENeuronConfig's: a Mixtral reads it, a Llama's NeuronConfig does not."""
    env = {**LLAMA, "SM_NEURON_CAPACITY_FACTOR": "1.0"}
    proc = neuronserve(INF2, env)
    assert proc.returncode == 2 and "NxD Inference's NeuronConfig does not read" in proc.stderr
    mixtral = {**env, "SM_VLLM_MODEL": model_dir("Mixtral-8x7B-v0.1"), "SM_VLLM_TENSOR_PARALLEL_SIZE": "24"}
    proc = neuronserve(INF2, {**mixtral, "NEURONSERVE_FIT_CHECK": "off"})
    assert proc.returncode == 0, proc.stderr


def test_each_lane_has_its_own_fields() -> None:
    """disable_argmax_kernel is a field of NxD Inference 2.28 (lane 2.28), not of 0.7.14366 (lane 2.27)."""
    env = {**LLAMA, "SM_NEURON_DISABLE_ARGMAX_KERNEL": "true"}
    assert neuronserve(INF2, {**env, "NEURONSERVE_STACK": "2.28"}).returncode == 0
    proc = neuronserve(INF2, {**env, "NEURONSERVE_STACK": "2.27"})
    assert proc.returncode == 2 and "nxdi-0.7.14366 models/config.py:563" in proc.stderr
    assert "disable_argmax_kernel" in override_fields.class_fields(V0_4.nxdi_source, "NeuronConfig")
    assert "disable_argmax_kernel" not in override_fields.class_fields(V0_2.nxdi_source, "NeuronConfig")


def test_a_key_the_plugin_pops_itself_is_no_neuron_config_field() -> None:
    """draft_overrides is popped by vllm-neuron 0.4.1 (loader :184), not by 0.2.2+lts."""
    env = {**LLAMA, "SM_NEURON_DRAFT_OVERRIDES": "{}"}
    assert neuronserve(INF2, {**env, "NEURONSERVE_STACK": "2.28"}).returncode == 0
    assert neuronserve(INF2, {**env, "NEURONSERVE_STACK": "2.27"}).returncode == 2


def test_lane_2_32_names_the_closest_documented_field() -> None:
    """vllm-neuron 0.24's documented neuron_config fields (aws-neuron-sdk vllm-neuron/docs/guides/
    reference-configuration.md:46-51, :79, :115)."""
    env = {
        "SM_VLLM_MODEL": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "NEURONSERVE_STACK": "2.32",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
        "SM_VLLM_MAX_MODEL_LEN": "1024",
        "SM_NEURON_NUM_BATCHED_TOKEN_BUCKETS": "[512, 1024]",
    }
    proc = neuronserve(["plan", "--instance-type", "trn2.48xlarge"], env)
    assert proc.returncode == 2, proc.stdout
    assert "(did you mean num_batched_tokens_buckets?)" in proc.stderr
    extra = {"neuron_config": {"num_seq_buckets": [4]}}
    proc = neuronserve(
        ["plan", "--instance-type", "trn2.48xlarge"],
        {**env, "SM_NEURON_NUM_BATCHED_TOKEN_BUCKETS": "", "SM_VLLM_ADDITIONAL_CONFIG": json.dumps(extra)},
    )
    assert proc.returncode == 2 and "(did you mean num_seqs_buckets?)" in proc.stderr


@pytest.mark.skipif(sources.reference_dir() is None, reason="no reference sources (../shared/reference)")
def test_the_field_list_is_what_the_reference_source_says() -> None:
    """fields.py is regenerated from the lanes' NxD Inference source; a drift fails here."""
    proc = subprocess.run(
        [str(ROOT / "scripts" / "neuron-config-fields"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_a_nested_multimodal_key_is_checked_against_the_model_s_class() -> None:
    """Llama 4's text_neuron_config is built with Llama4NeuronConfig (an MoENeuronConfig: capacity_factor
    is read), key by key like a top-level override (vllm-neuron 0.2.2+lts loader :428-437)."""
    env = {
        "SM_VLLM_MODEL": str(ROOT / "tests" / "contract" / "data" / "models" / "llama4-scout"),
        "SM_VLLM_MAX_MODEL_LEN": "2048",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "8",
        "NEURONSERVE_FIT_CHECK": "off",
    }
    nested = {"text_neuron_config": {"sequence_paralel_enabled": True}}
    proc = neuronserve(INF2, {**env, "SM_NEURON_OVERRIDE_CONFIG": json.dumps(nested)})
    assert proc.returncode == 2, proc.stdout
    assert (
        "sets text_neuron_config.sequence_paralel_enabled, which NxD Inference's Llama4NeuronConfig"
        in proc.stderr
    )
    assert "did you mean sequence_parallel_enabled?" in proc.stderr
    nested = {"text_neuron_config": {"capacity_factor": 1.0}}
    proc = neuronserve(INF2, {**env, "SM_NEURON_OVERRIDE_CONFIG": json.dumps(nested)})
    assert proc.returncode == 0, proc.stderr
