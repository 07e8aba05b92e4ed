"""Probes and drain for the serving container, from the plan.

- `startupProbe` on `/ping` (200 only when READY): its failure budget is the longest start the plan
  allows. A pod that may compile gets the compile budget: SAGEMAKER_STARTUP_TIMEOUT when set (the
  server fails itself at that deadline, so the probe waits a little longer and the log says why), else
  3600 s, SageMaker's own ceiling for a start (ContainerStartupHealthCheckTimeoutInSeconds). A pod with
  NEURONSERVE_REQUIRE_CACHE_HIT never compiles: it only loads the staged graphs and weights (the
  initContainer staged them before this container started), so its budget is the load budget, 900 s.
  Liveness and readiness wait for the startup probe, so a compile is never mistaken for a hang.
- `readinessProbe` on `/ping`: out of the Service's endpoints while LOADING, DRAINING or FAILED.
- `livenessProbe` on `/live`: 200 in every phase while the process makes progress, 503 when it is
  wedged (docs/DEPLOY.md, "EKS"), so a restart comes only from a real hang.
- Drain: a `preStop` sleep first (kube-proxy and the load balancer drop the pod's endpoint while it
  still serves), then SIGTERM: the server drains for NEURONSERVE_DRAIN_GRACE_S, then stops its engines
  (SIGTERM, SIGKILL after 10 s, a 5 s reap: engine/process.py `stop`). terminationGracePeriodSeconds
  covers all of it with a margin, so the kubelet's SIGKILL never cuts a drain short.
  The sleep action (`lifecycle.preStop.sleep`) needs no binary in the image (Kubernetes 1.30+, on by
  default: https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/).
"""

from __future__ import annotations

import math
from typing import Any

from neuronserve.types import LaunchPlan

PERIOD_S = 10
COMPILE_BUDGET_S = 3600
LOAD_BUDGET_S = 900
# The server's own deadline ends the start first; the probe allows for its last log lines.
STARTUP_MARGIN_S = 60
ENGINE_STOP_S = 15  # engine/process.py stop(): SIGTERM, 10 s, SIGKILL, a 5 s reap
GRACE_MARGIN_S = 10


def compile_budget_s(plan: LaunchPlan) -> int:
    """Seconds a start that compiles may take (SAGEMAKER_STARTUP_TIMEOUT, else the default)."""
    timeout = plan.serve.startup_timeout_s
    return math.ceil(timeout) if timeout else COMPILE_BUDGET_S


def startup_budget_s(plan: LaunchPlan) -> int:
    """The startup probe's budget: the compile budget, or the load budget when the pod must hit."""
    if plan.artifacts.require_hit:
        timeout = plan.serve.startup_timeout_s
        return min(LOAD_BUDGET_S, math.ceil(timeout)) if timeout else LOAD_BUDGET_S
    return compile_budget_s(plan)


def grace_period_s(plan: LaunchPlan, prestop_s: int) -> int:
    """terminationGracePeriodSeconds: the preStop sleep, the drain, the engines' stop, a margin."""
    return prestop_s + math.ceil(plan.serve.drain_grace_s) + ENGINE_STOP_S + GRACE_MARGIN_S


def _get(path: str, failures: int, period: int = PERIOD_S) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": 5,  # /ping answers within 2 s (the SageMaker contract) even under load
        "failureThreshold": failures,
    }


def probes(plan: LaunchPlan, prestop_s: int) -> dict[str, Any]:
    """The container's probe and lifecycle fields."""
    budget = startup_budget_s(plan) + STARTUP_MARGIN_S
    return {
        "startupProbe": _get("/ping", math.ceil(budget / PERIOD_S)),
        "readinessProbe": _get("/ping", 3),
        "livenessProbe": _get("/live", 3, period=20),
        "lifecycle": {"preStop": {"sleep": {"seconds": prestop_s}}},
    }
