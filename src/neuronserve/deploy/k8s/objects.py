"""The Kubernetes objects, each as the API spells it (apps/v1 Deployment, v1 Service, ServiceAccount and
ConfigMap, policy/v1 PodDisruptionBudget, batch/v1 Job), validated against the OpenAPI schemas of
Kubernetes 1.31 to 1.34 by the tests (tests/deploy/k8s/test_schemas.py).

Choices a Neuron server needs that the defaults get wrong:
- Deployment: `progressDeadlineSeconds` above the startup budget (the default 600 s would mark a
  compiling rollout failed); a rolling update that starts the new pod before stopping an old one
  (`maxSurge: 1`, `maxUnavailable: 0`), so a rollout never drops capacity (it needs room for one more
  pod); `replicas` left out when an autoscaler owns it, so a later `kubectl apply` does not reset it.
- The ConfigMap is named by a hash of its content, so a changed setting rolls the pods (a Deployment
  does not restart for an edited ConfigMap), and the compile Job is named by a hash of its pod, so a new
  configuration gets a new Job (a Job's pod template cannot be changed) and an unchanged one is left as is.
- PodDisruptionBudget `maxUnavailable: 1`: a node drain takes one pod at a time, and a single replica
  is never pinned (`minAvailable: 1` would block every drain).
- Prometheus: the `prometheus.io/scrape|port|path` annotations the common scrape configurations read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from neuronserve.deploy.k8s.options import K8sOptions

DEFAULT_PROGRESS_S = 600


def digest(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:8]


def labels(opts: K8sOptions, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "neuronserve",
        "app.kubernetes.io/instance": opts.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "neuronserve",
    }


def selector(opts: K8sOptions) -> dict[str, str]:
    return {k: v for k, v in labels(opts, "server").items() if k != "app.kubernetes.io/managed-by"}


def meta(opts: K8sOptions, name: str, component: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": opts.namespace, "labels": labels(opts, component), **extra}


def service_account(opts: K8sOptions) -> dict[str, Any]:
    annotations = {"eks.amazonaws.com/role-arn": opts.role_arn} if opts.role_arn else {}
    extra = {"annotations": annotations} if annotations else {}
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta(opts, opts.name, "server", **extra),
    }


def config_map(opts: K8sOptions, data: Mapping[str, str]) -> dict[str, Any]:
    content = dict(sorted(data.items()))
    name = f"{opts.name}-env-{digest(content)}"
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(opts, name, "server"), "data": content}


def deployment(
    opts: K8sOptions, pod: dict[str, Any], startup_budget_s: int, port: int, autoscaled: bool
) -> dict[str, Any]:
    template_meta = {
        "labels": labels(opts, "server"),
        "annotations": {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(port),
            "prometheus.io/path": "/metrics",
        },
    }
    spec: dict[str, Any] = {} if autoscaled else {"replicas": opts.replicas}
    spec.update(
        {
            "revisionHistoryLimit": 3,
            "progressDeadlineSeconds": max(DEFAULT_PROGRESS_S, startup_budget_s + DEFAULT_PROGRESS_S),
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "selector": {"matchLabels": selector(opts)},
            "template": {"metadata": template_meta, "spec": pod},
        }
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(opts, opts.name, "server"),
        "spec": spec,
    }


def service(opts: K8sOptions, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(opts, opts.name, "server"),
        "spec": {
            "type": "ClusterIP",
            "selector": selector(opts),
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def disruption_budget(opts: K8sOptions) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(opts, opts.name, "server"),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector(opts)}},
    }


def job(opts: K8sOptions, pod: dict[str, Any], deadline_s: int) -> dict[str, Any]:
    """The compile Job: one pod running `neuronserve compile` to completion (its own retries inside;
    one more pod if the first is lost with its node), kept a day for its logs."""
    template = {"metadata": {"labels": labels(opts, "compile")}, "spec": pod}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(opts, f"{opts.name}-compile-{digest(template)}", "compile"),
        "spec": {
            "backoffLimit": 1,
            "activeDeadlineSeconds": deadline_s,
            "ttlSecondsAfterFinished": 86400,
            "template": template,
        },
    }
