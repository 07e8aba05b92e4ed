"""`neuronserve deploy k8s` as a user runs it (a subprocess): YAML on stdout, notes on stderr; a directory
`kubectl apply -k` takes; what the container would refuse exits 2 with one line and renders nothing,
and no secret value reaches any output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuronserve.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/neuronserve:0.1.0"
MODEL = ["--env", "HF_MODEL_ID=TinyLlama/TinyLlama-1.1B-Chat-v1.0", "--env", "SM_VLLM_MAX_MODEL_LEN=2048"]
CACHE = ["--env", "NEURONSERVE_CACHE_URI=s3://acme-ml-artifacts/cache/"]
TOKEN = "hf_clitesttoken0123456789abcdef"
yaml = pytest.importorskip("yaml", reason="needs PyYAML to read the manifests back")


def deploy(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_TOKEN": TOKEN}  # a token in the shell: unused
    return subprocess.run(
        [sys.executable, "-m", "neuronserve", "deploy", "k8s", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120, env=env,
    )  # fmt: skip


def test_the_command_is_on_the_parser() -> None:
    args = build_parser().parse_args(["deploy", "k8s", "--image", "i", "--instance-type", "inf2.xlarge"])
    assert (args.command, args.target, args.autoscaler, args.neuron_resource) == (
        "deploy",
        "k8s",
        "none",
        "neuroncore",
    )


def test_yaml_on_stdout_notes_on_stderr() -> None:
    result = deploy("--image", IMAGE, "--instance-type", "ml.inf2.xlarge", *MODEL)
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == [
        "ServiceAccount",
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    ]
    assert "deploy k8s: pod: 2 aws.amazon.com/neuroncore" in result.stderr
    assert "Verdict: fine on a node with driver" in result.stderr
    assert TOKEN not in result.stdout + result.stderr  # the shell's HF_TOKEN never reaches the pods


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--env", "SM_VLLM_ENABLE_PREFIX_CACHING=yes"], "SM_VLLM_ENABLE_PREFIX_CACHING='yes' is a switch"),
        (["--env", "SM_VLLM_TENSOR_PARALLEL_SIZE=4"], "has 2 NeuronCores"),
        (["--env", f"HF_TOKEN={TOKEN}"], "plain text in the ConfigMap"),
        (["--secret", f"HF_TOKEN={TOKEN}"], "not the secret itself"),
        (["--autoscaler", "keda"], "needs a remote compile cache"),
        (["--name", "Bad_Name"], "--name 'Bad_Name'"),
        (["--env", "NEURONSERVE_CACHE_URI=s3://my-bucket/x/"], "s3://my-bucket/ is a placeholder"),
    ],
)
def test_a_refused_configuration_renders_nothing(tmp_path: Path, args: list[str], needle: str) -> None:
    out = tmp_path / "out"
    result = deploy("--image", IMAGE, "--instance-type", "inf2.xlarge", *MODEL, *args, "--output", str(out))
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neuronserve deploy: error: ") and needle in lines[0], (
        lines
    )
    assert not out.exists()
    assert TOKEN not in result.stderr


def test_a_directory_kubectl_apply_k_takes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    arn = "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf-AbCdEf"
    result = deploy(
        "--image", IMAGE, "--instance-type", "inf2.48xlarge", *MODEL, *CACHE,
        "--env", "SM_VLLM_TENSOR_PARALLEL_SIZE=8", "--autoscaler", "keda", "--secret", f"HF_TOKEN={arn}",
        "--secret", "SM_VLLM_API_KEY=vllm/api-key", "--namespace", "serving", "--output", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*.yaml"))
    assert files == [
        "base/configmap.yaml", "base/kustomization.yaml", "base/serviceaccount.yaml", "compile/job.yaml",
        "compile/kustomization.yaml", "deployment.yaml", "kustomization.yaml", "poddisruptionbudget.yaml",
        "scaledobject.yaml", "service.yaml",
    ]  # fmt: skip
    top = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert top["resources"] == [
        "base",
        "deployment.yaml",
        "service.yaml",
        "poddisruptionbudget.yaml",
        "scaledobject.yaml",
    ]
    job = yaml.safe_load((out / "compile" / "job.yaml").read_text())["metadata"]["name"]
    assert (
        f"kubectl apply -k {out}/compile && kubectl -n serving wait --for=condition=complete job/{job}"
        in result.stderr
    )
    again = deploy(
        "--image", IMAGE, "--instance-type", "inf2.48xlarge", *MODEL, *CACHE, "--env",
        "SM_VLLM_TENSOR_PARALLEL_SIZE=8", "--autoscaler", "hpa", "--output", str(out),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert not (out / "scaledobject.yaml").exists() and (out / "horizontalpodautoscaler.yaml").exists()
