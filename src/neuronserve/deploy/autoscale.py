"""Application Auto Scaling for an endpoint variant: target tracking on invocations per instance.

Neuron instances take minutes to start (and longer on a compile-cache miss), so scale-in is slow and
scale-out acts early; the target is per instance per minute.
"""

from __future__ import annotations

from typing import Any

from neuronserve.errors import ConfigError

NAMESPACE = "sagemaker"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"


def resource_id(endpoint: str, variant: str = "AllTraffic") -> str:
    return f"endpoint/{endpoint}/variant/{variant}"


def scalable_target_request(endpoint: str, variant: str, min_count: int, max_count: int) -> dict[str, Any]:
    if not 1 <= min_count <= max_count:
        raise ConfigError(f"--min {min_count} --max {max_count}: need 1 <= min <= max")
    return {
        "ServiceNamespace": NAMESPACE,
        "ResourceId": resource_id(endpoint, variant),
        "ScalableDimension": DIMENSION,
        "MinCapacity": min_count,
        "MaxCapacity": max_count,
    }


def policy_request(
    endpoint: str,
    variant: str,
    invocations_per_instance: float,
    scale_in_cooldown_s: int = 900,
    scale_out_cooldown_s: int = 120,
) -> dict[str, Any]:
    if invocations_per_instance <= 0:
        raise ConfigError(f"--target {invocations_per_instance}: invocations per instance must be positive")
    return {
        "PolicyName": f"{endpoint}-invocations-per-instance",
        "ServiceNamespace": NAMESPACE,
        "ResourceId": resource_id(endpoint, variant),
        "ScalableDimension": DIMENSION,
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": {
            "TargetValue": float(invocations_per_instance),
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
            },
            "ScaleInCooldown": scale_in_cooldown_s,
            "ScaleOutCooldown": scale_out_cooldown_s,
        },
    }


def apply(client: Any, target: dict[str, Any], policy: dict[str, Any]) -> str:
    """Register the target, put the policy; returns the policy ARN."""
    client.register_scalable_target(**target)
    response = client.put_scaling_policy(**policy)
    return str(response["PolicyARN"])
