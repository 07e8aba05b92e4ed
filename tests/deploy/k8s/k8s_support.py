"""What the EKS renderer's tests share: a model environment, a render helper, and the offline validators
(kubernetes-validate's OpenAPI schemas, KEDA's CRD kept in tests/data/keda/), each skipping with its
reason where this venv lacks the tool."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from neuronserve.deploy.k8s.options import K8sOptions
from neuronserve.deploy.k8s.render import Rendered, render

ROOT = Path(__file__).resolve().parents[3]
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/neuronserve:0.1.0-neuron"
MODEL = {"HF_MODEL_ID": "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "SM_VLLM_MAX_MODEL_LEN": "2048"}
CACHE = {"NEURONSERVE_CACHE_URI": "s3://acme-ml-artifacts/neuronserve-cache/"}
KUBERNETES_VERSIONS = ("1.31", "1.32", "1.33", "1.34")
KEDA_CRD = ROOT / "tests" / "data" / "keda" / "keda.sh_scaledobjects.yaml"


def options(instance: str = "inf2.xlarge", **kw: Any) -> K8sOptions:
    return dataclasses.replace(K8sOptions(image=IMAGE, instance_type=instance), **kw)


def rendered(env: dict[str, str] | None = None, instance: str = "inf2.xlarge", **kw: Any) -> Rendered:
    return render(options(instance, **kw), {**MODEL, **(env or {})})


def by_kind(result: Rendered) -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in result.documents()}


def server(result: Rendered) -> dict[str, Any]:
    return by_kind(result)["Deployment"]["spec"]["template"]["spec"]["containers"][0]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`neuronserve deploy k8s ARGS` as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "neuronserve", "deploy", "k8s", "--image", IMAGE, *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120, env=env,
    )  # fmt: skip


def validate_kubernetes(doc: dict[str, Any]) -> None:
    """Strict validation against every Kubernetes version's OpenAPI schema (unknown fields refused)."""
    kubernetes_validate = pytest.importorskip(
        "kubernetes_validate", reason="needs kubernetes-validate (the test extra; the dev venv has it)"
    )
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(doc, version, strict=True)


def validate_scaled_object(doc: dict[str, Any]) -> None:
    """Against the openAPIV3Schema of KEDA's CRD (tests/data/keda/README), as the API server would."""
    yaml = pytest.importorskip("yaml", reason="needs PyYAML to read the CRD")
    jsonschema = pytest.importorskip("jsonschema", reason="needs jsonschema")
    crd = yaml.safe_load(KEDA_CRD.read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == doc["apiVersion"].split("/")[1]]
    assert (
        doc["apiVersion"].split("/")[0] == crd["spec"]["group"]
        and doc["kind"] == crd["spec"]["names"]["kind"]
    )
    jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"]).validate(doc)
