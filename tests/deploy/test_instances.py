"""The NeuronCore check before anything is created (deploy/instances.py), and the sample environments
in sagemaker/envs/ on their instances: within the cores, and accepted by the plan for Neuron."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronserve.deploy.envfile import load_env
from neuronserve.deploy.instances import check_tensor_parallel, tensor_parallel_size
from neuronserve.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = {
    "inf2-xlarge-tinyllama.env": "ml.inf2.xlarge",
    "inf2-48xlarge-llama3-8b.env": "ml.inf2.48xlarge",
    "trn1-32xlarge-llama3-8b.env": "ml.trn1.32xlarge",
}


@pytest.mark.parametrize(
    ("env", "instance", "tp"),
    [
        ({}, "ml.inf2.xlarge", 1),
        ({"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}, "ml.inf2.xlarge", 2),
        ({"OPTION_TENSOR_PARALLEL_DEGREE": "max"}, "ml.inf2.48xlarge", 24),
        ({"HF_NUM_CORES": "32"}, "ml.trn1.32xlarge", 32),
        ({"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "HF_NUM_CORES": "2"}, "ml.inf2.48xlarge", 8),
    ],
)
def test_tensor_parallel_size(env: dict[str, str], instance: str, tp: int) -> None:
    assert tensor_parallel_size(env, instance) == tp
    assert check_tensor_parallel(env, instance) == tp


def test_tp_larger_than_the_instance_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"32 exceeds the 24 NeuronCores of ml\.inf2\.48xlarge"):
        check_tensor_parallel({"SM_VLLM_TENSOR_PARALLEL_SIZE": "32"}, "ml.inf2.48xlarge")
    with pytest.raises(ConfigError, match="not a Neuron instance type"):
        check_tensor_parallel({}, "ml.g5.xlarge")
    with pytest.raises(ConfigError, match="positive integer"):
        check_tensor_parallel({"HF_NUM_CORES": "two"}, "ml.inf2.xlarge")


@pytest.mark.parametrize(("name", "instance"), SAMPLES.items())
def test_sample_environments_fit_their_instances(name: str, instance: str) -> None:
    env = load_env(str(ROOT / "sagemaker" / "envs" / name), [])
    tp = check_tensor_parallel(env, instance)
    assert tp >= 2
    max_len = int(env["SM_VLLM_MAX_MODEL_LEN"])
    if env.get("SM_VLLM_ENABLE_PREFIX_CACHING") == "true":
        block = int(env["SM_VLLM_BLOCK_SIZE"])
        seqs = int(env["SM_VLLM_MAX_NUM_SEQS"])
        assert max_len % block == 0
        assert int(env["SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE"]) >= -(-max_len // block) * seqs
        assert env["SM_NEURON_IS_PREFIX_CACHING"] == env["SM_NEURON_IS_BLOCK_KV_LAYOUT"] == "true"


@pytest.mark.parametrize(("name", "instance"), SAMPLES.items())
def test_sample_environments_pass_the_plan_for_neuron(name: str, instance: str) -> None:
    """`neuronserve plan --device neuron` (every Neuron rule) accepts each sample on its instance's cores."""
    import os
    import subprocess
    import sys

    from neuronserve.deploy.instances import neuron_cores

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "OPTION_", "HF_", "NEURON"))}
    env.update(load_env(str(ROOT / "sagemaker" / "envs" / name), []))
    env["HF_MODEL_ID"] = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
    env["NEURON_RT_VISIBLE_CORES"] = f"0-{neuron_cores(instance) - 1}"
    env["PYTHONPATH"] = str(ROOT / "src")
    result = subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan", "--json", "--device", "neuron"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    argv = json.loads(result.stdout)["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == env["SM_VLLM_TENSOR_PARALLEL_SIZE"]
