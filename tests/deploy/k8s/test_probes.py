"""Probes and drain from the plan (deploy/k8s/probes.py): a compile budget unless the pod must hit the
cache, SAGEMAKER_STARTUP_TIMEOUT honoured, and a grace period above the whole drain."""

from __future__ import annotations

import pytest
from k8s_support import CACHE, MODEL

from neuronserve.deploy.k8s import probes
from neuronserve.deploy.validate import EKS, plan_check


def plan(env: dict[str, str]):  # type: ignore[no-untyped-def]
    return plan_check({**MODEL, **env}, "inf2.xlarge", EKS).plan


@pytest.mark.parametrize(
    ("env", "budget"),
    [
        ({}, 3600),
        ({**CACHE}, 3600),
        ({**CACHE, "NEURONSERVE_REQUIRE_CACHE_HIT": "true"}, 900),
        ({"SAGEMAKER_STARTUP_TIMEOUT": "7200"}, 7200),
        ({**CACHE, "NEURONSERVE_REQUIRE_CACHE_HIT": "true", "SAGEMAKER_STARTUP_TIMEOUT": "300"}, 300),
    ],
)
def test_the_startup_budget_follows_the_plan(env: dict[str, str], budget: int) -> None:
    p = plan(env)
    assert probes.startup_budget_s(p) == budget
    startup = probes.probes(p, 15)["startupProbe"]
    allowed = startup["periodSeconds"] * startup["failureThreshold"]
    assert budget < allowed <= budget + probes.STARTUP_MARGIN_S + startup["periodSeconds"]


def test_liveness_is_live_and_readiness_is_ping() -> None:
    fields = probes.probes(plan({}), 20)
    assert fields["startupProbe"]["httpGet"]["path"] == fields["readinessProbe"]["httpGet"]["path"] == "/ping"
    assert fields["livenessProbe"]["httpGet"]["path"] == "/live"
    assert fields["lifecycle"] == {"preStop": {"sleep": {"seconds": 20}}}


@pytest.mark.parametrize(("drain", "prestop"), [("25", 15), ("120", 0), ("0.5", 30)])
def test_the_grace_period_exceeds_the_drain(drain: str, prestop: int) -> None:
    p = plan({"NEURONSERVE_DRAIN_GRACE_S": drain})
    grace = probes.grace_period_s(p, prestop)
    assert grace > prestop + float(drain) + probes.ENGINE_STOP_S
