"""The deploy paths agree (deploy/validate.py): one environment is judged the same by `sagemaker/deploy.py
--dry-run`, `sagemaker/update.py --dry-run`, `ecs/render.py` and `neuronserve deploy k8s`, each run as a
user runs it; each takes both instance spellings. A refusal is the same message everywhere, the one
target-specific hint (where a model would come from) aside."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = {"HF_MODEL_ID": "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "SM_VLLM_MAX_MODEL_LEN": "2048"}
SAGEMAKER = [
    "--dry-run",
    "--name",
    "agree",
    "--image",
    "IMAGE",
    "--role",
    "arn:aws:iam::123456789012:role/sm",
]
PATHS = {
    "deploy.py": [sys.executable, str(ROOT / "sagemaker" / "deploy.py"), *SAGEMAKER],
    "update.py": [sys.executable, str(ROOT / "sagemaker" / "update.py"), *SAGEMAKER],
    "ecs/render.py": [sys.executable, str(ROOT / "ecs" / "render.py"), "--image", "IMAGE"],
    "deploy k8s": [sys.executable, "-m", "neuronserve", "deploy", "k8s", "--image", "IMAGE"],
}
ENVS = {
    "fine": {**MODEL},
    "prefix caching yes": {**MODEL, "SM_VLLM_ENABLE_PREFIX_CACHING": "yes"},
    "misspelled variable": {**MODEL, "SM_VLLM_TENSOR_PARALEL_SIZE": "2"},
    "TP over the instance": {**MODEL, "SM_VLLM_TENSOR_PARALLEL_SIZE": "4"},
    "no model": {"SM_VLLM_MAX_MODEL_LEN": "2048"},
    "no length for a hub model": {"HF_MODEL_ID": "TinyLlama/TinyLlama-1.1B-Chat-v1.0"},
    "placeholder cache": {**MODEL, "NEURONSERVE_CACHE_URI": "s3://my-bucket/neuronserve-cache/"},
    "bad number": {**MODEL, "SM_VLLM_MAX_NUM_SEQS": "zero"},
    "misspelled TGI name": {**MODEL, "HF_NUM_CORE": "2"},
    "misspelled LMI option": {**MODEL, "OPTION_TENSOR_PARALLEL_DEGRE": "2"},
    "LMI quantize": {**MODEL, "OPTION_QUANTIZE": "awq"},
    "TGI quantize": {**MODEL, "HF_MODEL_QUANTIZE": "awq"},
}


def run(path: str, instance: str, env: dict[str, str], *more: str) -> subprocess.CompletedProcess[str]:
    flags = [a for k, v in env.items() for a in ("--env", f"{k}={v}")] + list(more)
    process_env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "AWS_REGION": "us-west-2"}
    return subprocess.run(
        [*PATHS[path], "--instance-type", instance, *flags],
        capture_output=True, text=True, cwd=ROOT, timeout=120, env=process_env,
    )  # fmt: skip


def verdict(result: subprocess.CompletedProcess[str]) -> tuple[int, str]:
    """The exit code and the refusal without the tool's prefix, the instance's spelling or the model hint."""
    if result.returncode == 0:
        return 0, ""
    message = result.stderr.strip().splitlines()[-1].split("error: ", 1)[1]
    message = re.sub(r"^the container would refuse this environment on (ml\.)?inf2\.xlarge: ", "", message)
    return result.returncode, message.split(" put the model in ")[0]


@pytest.mark.parametrize("name", sorted(ENVS))
def test_one_environment_one_verdict(name: str) -> None:
    verdicts = {path: verdict(run(path, "inf2.xlarge", ENVS[name])) for path in PATHS}
    assert len(set(verdicts.values())) == 1, verdicts
    [(code, message)] = set(verdicts.values())
    assert code in (0, 2), verdicts
    if name == "fine":
        assert code == 0
    elif name != "misspelled variable":  # the plan's own judgement (issue 25): the same everywhere
        assert code == 2 and message, verdicts


@pytest.mark.parametrize("path", sorted(PATHS))
def test_both_instance_spellings_everywhere(path: str) -> None:
    """`ml.inf2.xlarge` and `inf2.xlarge` give the same output, in the target's spelling."""
    bare, prefixed = (run(path, instance, MODEL) for instance in ("inf2.xlarge", "ml.inf2.xlarge"))
    assert bare.returncode == prefixed.returncode == 0, bare.stderr + prefixed.stderr
    assert bare.stdout == prefixed.stdout
    if path == "deploy.py":
        assert '"InstanceType": "ml.inf2.xlarge"' in bare.stdout
    elif path != "update.py":  # UpdateEndpoint names configs by a hash of the request: equal above
        assert "ml.inf2.xlarge" not in bare.stdout and "inf2.xlarge" in bare.stdout


@pytest.mark.parametrize("path", sorted(PATHS))
def test_model_config_checks_the_fit_of_a_model_on_s3(path: str) -> None:
    """`--model-config PATH` on every renderer: a 70B on S3 at 131,072 tokens is refused at render with
    the HBM numbers (without it the plan cannot read the model's shape from here and lets it pass)."""
    config = str(ROOT / "tests" / "data" / "models" / "Llama-3.3-70B-Instruct" / "config.json")
    env = {"SM_VLLM_MODEL": "s3://acme-ml-models/llama-3.3-70b/", "SM_VLLM_MAX_MODEL_LEN": "131072"}
    assert run(path, "inf2.48xlarge", env).returncode == 0
    refused = run(path, "inf2.48xlarge", env, "--model-config", config)
    assert refused.returncode == 2, refused.stderr
    assert "HBM estimate on inf2.48xlarge (Inferentia2)" in refused.stderr and "= 296 %" in refused.stderr
    missing = run(path, "inf2.48xlarge", env, "--model-config", "/nonexistent/config.json")
    assert (
        missing.returncode == 2 and "--model-config /nonexistent/config.json: no such file" in missing.stderr
    )


@pytest.mark.parametrize("path", sorted(PATHS))
def test_data_parallel_auto_and_inf1_everywhere(path: str) -> None:
    """DP `auto` is resolved from the declared instance (it was refused: "needs the visible NeuronCores");
    inf1 is refused as Inferentia1, not as an unknown type."""
    auto = run(
        path,
        "inf2.48xlarge",
        {**MODEL, "SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "SM_VLLM_DATA_PARALLEL_SIZE": "auto"},
    )
    assert auto.returncode == 0, auto.stderr
    assert "SM_VLLM_DATA_PARALLEL_SIZE=auto: 3 replica(s) of TP 8 on 24 visible NeuronCores" in auto.stderr
    inf1 = run(path, "ml.inf1.xlarge", MODEL)
    assert (
        inf1.returncode == 2 and "is Inferentia1 (inf1), which vLLM on Neuron does not serve" in inf1.stderr
    )
