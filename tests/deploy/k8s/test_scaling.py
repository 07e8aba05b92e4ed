"""The autoscalers (deploy/k8s/scaling.py): targets from the pod's batch, queries on the series the front
exports, the Deployment's pods and not the compile Job's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from k8s_support import ROOT, options

from neuronserve.deploy.k8s import scaling


def test_targets_from_the_batch_or_the_flags() -> None:
    assert scaling.targets(options(), 8) == (8, 2)
    assert scaling.targets(options(), 2) == (2, 1)
    assert scaling.targets(options(target_in_flight=5, target_queue=3), 8) == (5, 3)


def test_the_series_are_the_fronts_and_vllms() -> None:
    """neuronserve_in_flight is the front's own gauge; vllm:num_requests_waiting is vLLM's, relayed."""
    front = (ROOT / "src" / "neuronserve" / "front" / "metrics.py").read_text()
    assert f'"{scaling.IN_FLIGHT}"' in front
    vllm = pytest.importorskip("vllm", reason="vLLM (the cpu extra) names the queue metric")
    sources = Path(vllm.__file__).parent.rglob("*.py")
    assert any(scaling.QUEUE in p.read_text(errors="ignore") for p in sources if "metrics" in str(p))


def test_the_query_selects_the_deployments_pods_only() -> None:
    selector = scaling.pod_selector(options(name="llama", namespace="serving"))
    pattern = re.search(r'pod=~"([^"]+)"', selector)
    assert pattern and 'namespace="serving"' in selector
    regex = re.compile(pattern.group(1))  # Prometheus anchors =~ at both ends
    assert regex.fullmatch("llama-7c9f8d6b5-x2k4p")
    assert not regex.fullmatch("llama-compile-1a2b3c4d-x2k4p")  # the Job's pod
    assert not regex.fullmatch("llama2-7c9f8d6b5-x2k4p")


def test_keda_and_hpa_scale_the_deployment() -> None:
    keda = scaling.scaled_object(options(min_replicas=2, max_replicas=6), 8)
    assert keda["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "neuronserve",
    }
    assert (keda["spec"]["minReplicaCount"], keda["spec"]["maxReplicaCount"]) == (2, 6)
    queries = [t["metadata"]["query"] for t in keda["spec"]["triggers"]]
    assert queries[0].startswith("sum(neuronserve_in_flight{") and queries[1].startswith(
        "sum(vllm:num_requests_waiting{"
    )
    assert [t["metadata"]["threshold"] for t in keda["spec"]["triggers"]] == ["8", "2"]
    hpa = scaling.horizontal_autoscaler(options(), 8)
    assert [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]] == [
        "neuronserve_in_flight",
        "vllm_num_requests_waiting",
    ]
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] >= 600
