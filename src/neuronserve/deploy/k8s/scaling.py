"""Autoscaling the Deployment on the metrics the front exports (front/metrics.py), by KEDA or by an HPA.

Two signals, each a per-pod target (the autoscaler divides the sum over pods by the pod count):
- in flight: `neuronserve_in_flight`, the sequences the front has admitted and not yet answered. A pod
  runs `max_num_seqs` sequences per engine at once (the compiled batch on Neuron), DP engines in all,
  capped by NEURONSERVE_MAX_CONCURRENCY; more in flight than that is queueing, so that is the target.
- queue depth: `vllm:num_requests_waiting`, the requests each engine holds back for want of a batch
  slot (vLLM's own metric, relayed by the front with a `replica` label: front/replica_metrics.py);
  the target is a quarter of the pod's batch, at least 1.

Scale-out is only sane on cache hits: a new pod that compiles takes many minutes, so render.py starts
autoscaled pods with NEURONSERVE_REQUIRE_CACHE_HIT=true. Scale-in is slow and one pod at a time: a Neuron
pod's start is expensive and a scaled-in pod drops its warm graphs.

KEDA: a ScaledObject with two Prometheus triggers (keda.sh/v1alpha1; the CRD of KEDA 2.20.2 validates it in
tests/deploy/k8s/test_schemas.py). The query selects the Deployment's pods by the `namespace` and `pod`
labels that both the Prometheus Helm chart's `kubernetes-pods` job and a PodMonitor attach. HPA: the
same two series through a custom metrics adapter (prometheus-adapter), whose rules must expose them
under these names (docs/DEPLOY.md, "EKS": the adapter rule).
"""

from __future__ import annotations

from typing import Any

from neuronserve.deploy.k8s.objects import meta
from neuronserve.deploy.k8s.options import K8sOptions

IN_FLIGHT = "neuronserve_in_flight"
QUEUE = "vllm:num_requests_waiting"
QUEUE_HPA = "vllm_num_requests_waiting"  # the adapter's name for it (':' is no custom metric name)
SCALE_UP = {"stabilizationWindowSeconds": 0, "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}]}
SCALE_DOWN = {
    "stabilizationWindowSeconds": 900,
    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 600}],
}


def targets(opts: K8sOptions, batch: int) -> tuple[int, int]:
    """(in flight, queue depth) per pod: the flags, else the pod's batch and a quarter of it."""
    in_flight = opts.target_in_flight or max(1, batch)
    queue = opts.target_queue or max(1, batch // 4)
    return in_flight, queue


def pod_selector(opts: K8sOptions) -> str:
    """The Deployment's pods (NAME-<replicaset hash>-<5 characters>), not the compile Job's."""
    return f'namespace="{opts.namespace}",pod=~"{opts.name}-[a-z0-9]+-[a-z0-9]{{5}}"'


def scaled_object(opts: K8sOptions, batch: int) -> dict[str, Any]:
    in_flight, queue = targets(opts, batch)
    pods = pod_selector(opts)

    def trigger(name: str, series: str, threshold: int) -> dict[str, Any]:
        return {
            "type": "prometheus",
            "name": name,
            "metricType": "AverageValue",
            "metadata": {
                "serverAddress": opts.prometheus_url,
                "query": f"sum({series}{{{pods}}})",
                "threshold": str(threshold),
            },
        }

    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": meta(opts, opts.name, "server"),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": opts.name},
            "minReplicaCount": opts.min_replicas,
            "maxReplicaCount": opts.max_replicas,
            "pollingInterval": 15,
            "advanced": {
                "horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": SCALE_UP, "scaleDown": SCALE_DOWN}}
            },
            "triggers": [trigger("in-flight", IN_FLIGHT, in_flight), trigger("queue-depth", QUEUE, queue)],
        },
    }


def horizontal_autoscaler(opts: K8sOptions, batch: int) -> dict[str, Any]:
    in_flight, queue = targets(opts, batch)

    def pods_metric(name: str, value: int) -> dict[str, Any]:
        return {
            "type": "Pods",
            "pods": {
                "metric": {"name": name},
                "target": {"type": "AverageValue", "averageValue": str(value)},
            },
        }

    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": meta(opts, opts.name, "server"),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": opts.name},
            "minReplicas": opts.min_replicas,
            "maxReplicas": opts.max_replicas,
            "metrics": [pods_metric(IN_FLIGHT, in_flight), pods_metric(QUEUE_HPA, queue)],
            "behavior": {"scaleUp": SCALE_UP, "scaleDown": SCALE_DOWN},
        },
    }
