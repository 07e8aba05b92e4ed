"""Autoscaling requests (deploy/autoscale.py): their values, and their shape checked against botocore's
application-autoscaling service model."""

from __future__ import annotations

import pytest

pytest.importorskip("botocore")

from service_model import check

from neuronserve.deploy.autoscale import policy_request, scalable_target_request
from neuronserve.errors import ConfigError


def test_autoscaling_requests() -> None:
    target = scalable_target_request("ep", "AllTraffic", 1, 3)
    assert target["ResourceId"] == "endpoint/ep/variant/AllTraffic"
    assert target["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    policy = policy_request("ep", "AllTraffic", 12)
    config = policy["TargetTrackingScalingPolicyConfiguration"]
    assert (
        config["PredefinedMetricSpecification"]["PredefinedMetricType"]
        == "SageMakerVariantInvocationsPerInstance"
    )
    assert config["TargetValue"] == 12.0
    with pytest.raises(ConfigError):
        scalable_target_request("ep", "AllTraffic", 3, 1)


@pytest.mark.parametrize("metric", ["invocations", "concurrency"])
def test_autoscaling_requests_match_the_model(metric: str) -> None:
    check(
        "application-autoscaling", "RegisterScalableTarget", scalable_target_request("ns", "AllTraffic", 1, 4)
    )
    check("application-autoscaling", "PutScalingPolicy", policy_request("ns", "AllTraffic", 6, metric=metric))
