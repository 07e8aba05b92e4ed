"""Application Auto Scaling for an endpoint variant: target tracking on invocations or on concurrency.

Two predefined metrics (botocore application-autoscaling/2016-02-06/service-2.json, enum `MetricType`):
- `SageMakerVariantInvocationsPerInstance`: requests per instance per minute. It counts a request
  when it starts, so a 40 s streamed generation weighs as much as a 50 ms one.
- `SageMakerVariantConcurrentRequestsPerModelHighResolution`: requests in flight per model copy,
  published every 10 s. For streaming LLMs this is the one to use: in-flight requests are what fill
  the engine's batch (`max_num_seqs`), and it reacts in seconds rather than minutes. Set the target
  a little under the configured max_num_seqs (docs/DEPLOY.md, "Autoscaling").
Neuron instances take minutes to start (and longer on a compile-cache miss), so scale-in is slow and
scale-out acts early.
"""

from __future__ import annotations

from typing import Any

from neuronserve.errors import ConfigError

NAMESPACE = "sagemaker"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"
METRICS = {
    "invocations": "SageMakerVariantInvocationsPerInstance",
    "concurrency": "SageMakerVariantConcurrentRequestsPerModelHighResolution",
}
# The invocations policy keeps its earlier name, so re-running autoscale replaces it instead of adding one.
POLICY_SUFFIX = {"invocations": "invocations-per-instance", "concurrency": "concurrent-requests"}


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
    *,
    scale_in_cooldown_s: int = 900,
    scale_out_cooldown_s: int = 120,
    metric: str = "invocations",
) -> dict[str, Any]:
    """The target-tracking policy; `invocations_per_instance` is the target of the chosen metric
    (per instance per minute for `invocations`, requests in flight per model for `concurrency`)."""
    if metric not in METRICS:
        raise ConfigError(f"--metric {metric}: expected one of {', '.join(METRICS)}")
    if invocations_per_instance <= 0:
        raise ConfigError(f"--target {invocations_per_instance}: the target must be positive")
    return {
        "PolicyName": f"{endpoint}-{POLICY_SUFFIX[metric]}",
        "ServiceNamespace": NAMESPACE,
        "ResourceId": resource_id(endpoint, variant),
        "ScalableDimension": DIMENSION,
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": {
            "TargetValue": float(invocations_per_instance),
            "PredefinedMetricSpecification": {"PredefinedMetricType": METRICS[metric]},
            "ScaleInCooldown": scale_in_cooldown_s,
            "ScaleOutCooldown": scale_out_cooldown_s,
        },
    }


def apply(client: Any, target: dict[str, Any], policy: dict[str, Any]) -> str:
    """Register the target, put the policy; returns the policy ARN."""
    client.register_scalable_target(**target)
    response = client.put_scaling_policy(**policy)
    return str(response["PolicyARN"])
