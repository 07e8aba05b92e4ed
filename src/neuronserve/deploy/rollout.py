"""Roll a new model or configuration onto a live endpoint: UpdateEndpoint with a blue/green policy.

A model and an endpoint config are immutable, so each change gets new ones, named by a hash of their
requests (`spec.revision_of`): `NAME-model-<hash>` and `NAME-config-<hash>`. An unchanged spec hashes
to the config already live and nothing is called. SageMaker brings up the new (green) fleet, shifts
traffic, watches the given CloudWatch alarms, and rolls back by itself if one fires during the baking
period; `wait_in_service` then sees the old config and says so. Shapes: botocore
sagemaker/2017-07-24/service-2.json `DeploymentConfig`, `BlueGreenUpdatePolicy`,
`TrafficRoutingConfig` (Type ALL_AT_ONCE | CANARY | LINEAR, WaitIntervalInSeconds 0-3600),
`TerminationWaitInSeconds` 0-3600, `MaximumExecutionTimeoutInSeconds` 600-28800, `AlarmList` 1-10.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from neuronserve.deploy.endpoint import (
    POLL_S,
    _snake,
    create_model_and_config,
    describe_or_none,
    sagemaker_client,
    wait_in_service,
)
from neuronserve.deploy.errors import DeployError
from neuronserve.deploy.spec import DeploySpec, revision_of
from neuronserve.deploy.speccheck import validate
from neuronserve.errors import ConfigError


@dataclass(frozen=True)
class Rollout:
    traffic: str = "ALL_AT_ONCE"  # or CANARY: a share of the green fleet takes traffic first
    canary_percent: int = 25
    wait_interval_s: int = 600  # baking period between traffic shifts, alarms watched
    termination_wait_s: int = 600  # old fleet kept this long after the shift (fast rollback)
    alarms: tuple[str, ...] = ()


def deployment_config(rollout: Rollout, spec: DeploySpec) -> dict[str, Any]:
    """`DeploymentConfig` in the API's spelling. The execution timeout covers the green fleet's
    download and health check (a Neuron start may compile) plus the baking and termination waits."""
    kind = rollout.traffic.upper().replace("-", "_")
    if kind not in ("ALL_AT_ONCE", "CANARY"):
        raise ConfigError(f"--traffic {rollout.traffic}: expected all-at-once or canary")
    for label, value in (
        ("--wait-interval", rollout.wait_interval_s),
        ("--termination-wait", rollout.termination_wait_s),
    ):
        if not 0 <= value <= 3600:
            raise ConfigError(f"{label} {value}: SageMaker accepts 0 to 3600 seconds")
    if len(rollout.alarms) > 10:
        raise ConfigError("--alarm: at most 10 CloudWatch alarms")
    routing: dict[str, Any] = {"Type": kind, "WaitIntervalInSeconds": rollout.wait_interval_s}
    if kind == "CANARY":
        if not 1 <= rollout.canary_percent <= 50:
            raise ConfigError(f"--canary-percent {rollout.canary_percent}: 1 to 50 (% of the new fleet)")
        routing["CanarySize"] = {"Type": "CAPACITY_PERCENT", "Value": rollout.canary_percent}
    timeout = spec.download_timeout_s + spec.startup_timeout_s + rollout.wait_interval_s + 600
    config: dict[str, Any] = {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": routing,
            "TerminationWaitInSeconds": rollout.termination_wait_s,
            "MaximumExecutionTimeoutInSeconds": max(600, min(28800, timeout)),
        }
    }
    if rollout.alarms:
        config["AutoRollbackConfiguration"] = {"Alarms": [{"AlarmName": a} for a in rollout.alarms]}
    return config


def update_request(spec: DeploySpec, rollout: Rollout) -> dict[str, Any]:
    """UpdateEndpoint's input (`UpdateEndpointInput`) for `spec` with its content-hash names."""
    spec = replace(spec, revision=revision_of(spec))
    return {
        "EndpointName": spec.endpoint_name,
        "EndpointConfigName": spec.endpoint_config_name,
        "DeploymentConfig": deployment_config(rollout, spec),
    }


def update(
    spec: DeploySpec,
    rollout: Rollout,
    *,
    session: Any = None,
    region: str | None = None,
    wait: bool = False,
    poll_s: float = POLL_S,
) -> dict[str, Any]:
    """Create the new model and config (unless they exist: same hash, same content), then
    UpdateEndpoint. With `wait`: until InService on the new config, then the previous config and its
    models are deleted (they are what a rollback needed). Returns what it did, for printing."""
    validate(spec)
    spec = replace(spec, revision=revision_of(spec))
    request = update_request(spec, rollout)
    client = sagemaker_client(session, region)
    endpoint = describe_or_none(client.describe_endpoint, EndpointName=spec.endpoint_name)
    if endpoint is None:
        raise DeployError(f"endpoint {spec.endpoint_name}: not found; deploy it first (sagemaker/deploy.py)")
    previous = endpoint["EndpointConfigName"]
    result: dict[str, Any] = {"EndpointName": spec.endpoint_name, "Previous": previous}
    if previous == spec.endpoint_config_name:
        return {**result, "EndpointConfigName": previous, "Changed": False}
    if endpoint["EndpointStatus"] != "InService":
        raise DeployError(
            f"endpoint {spec.endpoint_name} is {endpoint['EndpointStatus']}: UpdateEndpoint needs InService "
            "(wait for the running operation, or delete and redeploy a Failed endpoint)"
        )
    config = describe_or_none(client.describe_endpoint_config, EndpointConfigName=spec.endpoint_config_name)
    if config is None:
        if describe_or_none(client.describe_model, ModelName=spec.model_name) is None:
            create_model_and_config(spec, session, region)
        else:
            from sagemaker.core.resources import EndpointConfig

            from neuronserve.deploy.spec import config_request

            EndpointConfig.create(**_snake(config_request(spec)), session=session, region=region)
    from sagemaker.core.resources import Endpoint

    live = Endpoint.get(endpoint_name=spec.endpoint_name, session=session, region=region)
    live.endpoint_config_name = spec.endpoint_config_name
    live.update(deployment_config=_snake(request["DeploymentConfig"]))
    result.update({"EndpointConfigName": spec.endpoint_config_name, "Changed": True})
    if wait:
        wait_in_service(client, spec.endpoint_name, spec.endpoint_config_name, poll_s)
        old = describe_or_none(client.describe_endpoint_config, EndpointConfigName=previous)
        if old:
            client.delete_endpoint_config(EndpointConfigName=previous)
        for variant in (old or {}).get("ProductionVariants", []):
            if variant["ModelName"] != spec.model_name and describe_or_none(
                client.describe_model, ModelName=variant["ModelName"]
            ):
                client.delete_model(ModelName=variant["ModelName"])
        result["Deleted"] = [previous]
    return result
