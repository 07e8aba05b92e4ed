"""`kubectl kustomize` renders the output directory (and its compile part) with no cluster: the objects
it lists are the ones written, and they read back equal. kubectl is on these machines; a machine without
it skips, saying so."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from k8s_support import CACHE, MODEL, options

from neuronserve.deploy.k8s import yamlout
from neuronserve.deploy.k8s.render import render

yaml = pytest.importorskip("yaml", reason="needs PyYAML to read kubectl's output")
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed here")


def kubectl(*args: str) -> str:
    assert KUBECTL is not None
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, check=True, timeout=60).stdout


def test_kubectl_is_recent_enough() -> None:
    """kustomize inside kubectl since 1.14; the client here must read policy/v1, batch/v1, autoscaling/v2."""
    version = json.loads(kubectl("version", "--client", "-o", "json"))["clientVersion"]
    assert (int(version["major"]), int(version["minor"].rstrip("+"))) >= (1, 27), version


def key(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


@pytest.mark.parametrize("autoscaler", ["keda", "hpa"])
def test_kustomize_renders_the_directory(tmp_path: Path, autoscaler: str) -> None:
    result = render(
        options("inf2.48xlarge", autoscaler=autoscaler),
        {**MODEL, **CACHE, "SM_VLLM_TENSOR_PARALLEL_SIZE": "4"},
    )
    out = tmp_path / "out"
    yamlout.write(out, yamlout.layout(result.base, result.compile, result.server))
    served = {key(d): d for d in yaml.safe_load_all(kubectl("kustomize", str(out))) if d}
    compiled = {key(d): d for d in yaml.safe_load_all(kubectl("kustomize", str(out / "compile"))) if d}
    base = {key(d) for _, d in result.base}
    assert set(served) == base | {key(d) for _, d in result.server}
    assert set(compiled) == base | {key(d) for _, d in result.compile}
    for name, doc in (*result.base, *result.server):
        assert served[key(doc)] == doc, name  # kustomize changes nothing: no name prefix, no labels added


def test_a_render_without_cache_has_no_compile_part(tmp_path: Path) -> None:
    result = render(options(), MODEL)
    yamlout.write(tmp_path, yamlout.layout(result.base, result.compile, result.server))
    assert not (tmp_path / "compile").exists()
    kinds = {d["kind"] for d in yaml.safe_load_all(kubectl("kustomize", str(tmp_path))) if d}
    assert kinds == {"ServiceAccount", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"}
