"""Create, update, describe and delete a SageMaker real-time endpoint with sagemaker-core resources.

`deploy` makes three calls (Model, EndpointConfig, Endpoint) from the request dicts of `spec.py`;
`update` rolls a changed spec onto a live endpoint (see `rollout.py`). Waits poll DescribeEndpoint
themselves instead of sagemaker-core's `wait_for_status`/`wait_for_delete`: those draw a rich panel,
raise `FailedStatusError` as a traceback, and `wait_for_delete` takes any ValidationException for
"gone" (sagemaker-core 2.27 resources.py:10559 and :10622).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from neuronserve.deploy.errors import DeployError
from neuronserve.deploy.spec import DeploySpec, config_request, model_request
from neuronserve.deploy.speccheck import validate

POLL_S = 15.0
# Creating a Neuron endpoint: instance start, download (<= 3600 s) and health check (<= 3600 s).
CREATE_TIMEOUT_S = 3 * 3600
DELETE_TIMEOUT_S = 1800


def _snake(value: Any) -> Any:
    """API spelling -> sagemaker-core's snake_case fields; `Environment` keys are variable names, kept."""
    from sagemaker.core.utils.utils import pascal_to_snake

    if isinstance(value, list):
        return [_snake(v) for v in value]
    if isinstance(value, dict):
        return {pascal_to_snake(k): (dict(v) if k == "Environment" else _snake(v)) for k, v in value.items()}
    return value


def not_found(err: Exception) -> bool:
    """A Describe* answer meaning "no such resource". SageMaker says so with ValidationException and
    "Could not find ..." (moto 5.2.5 sagemaker/models.py:2983, :3600, :3645 copy the service's
    wording); any other ValidationException (throttling-free bad input, a wrong region ARN) is real."""
    response = getattr(err, "response", None)
    if not isinstance(response, dict):
        return False
    error = response.get("Error", {})
    code, message = str(error.get("Code", "")), str(error.get("Message", ""))
    return code == "ResourceNotFound" or (code == "ValidationException" and "Could not find" in message)


def sagemaker_client(session: Any = None, region: str | None = None) -> Any:
    import boto3

    return (session or boto3.Session()).client("sagemaker", region_name=region)


def describe_or_none(call: Callable[..., Any], **kwargs: Any) -> Any:
    """`call(**kwargs)`, or None when the resource does not exist (`not_found`)."""
    from botocore.exceptions import ClientError

    try:
        return call(**kwargs)
    except ClientError as err:
        if not_found(err):
            return None
        raise


def wait_in_service(
    client: Any,
    name: str,
    config_name: str | None,
    poll_s: float = POLL_S,
    timeout_s: float = CREATE_TIMEOUT_S,
) -> dict[str, Any]:
    """Poll until InService. Failed (or a rollback to another config) raises DeployError with the
    endpoint's FailureReason: the one line a user needs, not a traceback."""
    deadline = time.monotonic() + timeout_s
    while True:
        described = client.describe_endpoint(EndpointName=name)
        status = described["EndpointStatus"]
        if status == "InService":
            current = described.get("EndpointConfigName")
            if config_name is not None and current != config_name:
                raise DeployError(
                    f"endpoint {name} rolled back to {current} (wanted {config_name}): "
                    f"{described.get('FailureReason', 'see its CloudWatch alarms and events')}"
                )
            return dict(described)
        if status in ("Failed", "UpdateRollbackFailed", "OutOfService"):
            raise DeployError(
                f"endpoint {name} is {status}: {described.get('FailureReason', 'no FailureReason given')} "
                f"(container logs: CloudWatch /aws/sagemaker/Endpoints/{name})"
            )
        if time.monotonic() >= deadline:
            raise DeployError(f"endpoint {name} still {status} after {timeout_s:.0f} s")
        time.sleep(poll_s)


def create_model_and_config(spec: DeploySpec, session: Any, region: str | None) -> None:
    from sagemaker.core.resources import EndpointConfig, Model

    model = _snake(model_request(spec))
    Model.create(**model, session=session, region=region)
    EndpointConfig.create(**_snake(config_request(spec)), session=session, region=region)


def deploy(
    spec: DeploySpec,
    session: Any = None,
    region: str | None = None,
    wait: bool = False,
    poll_s: float = POLL_S,
) -> dict[str, Any] | None:
    """Create model, endpoint config and endpoint; with `wait`, returns the InService description."""
    validate(spec)
    from sagemaker.core.resources import Endpoint

    create_model_and_config(spec, session, region)
    tags = _snake(model_request(spec)).get("tags")
    Endpoint.create(
        endpoint_name=spec.endpoint_name,
        endpoint_config_name=spec.endpoint_config_name,
        **({"tags": tags} if tags else {}),
        session=session,
        region=region,
    )
    if wait:
        return wait_in_service(sagemaker_client(session, region), spec.endpoint_name, None, poll_s)
    return None


def describe(name: str, session: Any = None, region: str | None = None) -> dict[str, Any]:
    """Status, failure reason, and each variant with its instance type, counts and images."""
    client = sagemaker_client(session, region)
    endpoint = describe_or_none(client.describe_endpoint, EndpointName=name)
    if endpoint is None:
        raise DeployError(f"endpoint {name}: not found in {client.meta.region_name}")
    config = describe_or_none(
        client.describe_endpoint_config, EndpointConfigName=endpoint["EndpointConfigName"]
    )
    configured = {v["VariantName"]: v for v in (config or {}).get("ProductionVariants", [])}
    variants = []
    for live in endpoint.get("ProductionVariants", []):
        want = configured.get(live["VariantName"], {})
        variants.append(
            {
                "VariantName": live["VariantName"],
                "InstanceType": want.get("InstanceType"),
                "ModelName": want.get("ModelName"),
                "CurrentInstanceCount": live.get("CurrentInstanceCount"),
                "DesiredInstanceCount": live.get("DesiredInstanceCount"),
                "VariantStatus": [s.get("Status") for s in live.get("VariantStatus", [])],
                "DeployedImages": [
                    i.get("ResolvedImage") or i.get("SpecifiedImage") for i in live.get("DeployedImages", [])
                ],
            }
        )
    out: dict[str, Any] = {
        "EndpointName": endpoint["EndpointName"],
        "EndpointStatus": endpoint["EndpointStatus"],
        "EndpointConfigName": endpoint["EndpointConfigName"],
        "ProductionVariants": variants,
    }
    for key in ("FailureReason", "AsyncInferenceConfig", "LastDeploymentConfig", "PendingDeploymentSummary"):
        if endpoint.get(key):
            out[key] = endpoint[key]
    if config and config.get("AsyncInferenceConfig") and "AsyncInferenceConfig" not in out:
        out["AsyncInferenceConfig"] = config["AsyncInferenceConfig"]
    return out


def wait_gone(client: Any, name: str, poll_s: float = POLL_S, timeout_s: float = DELETE_TIMEOUT_S) -> None:
    """DeleteEndpoint returns while the endpoint is still Deleting; a CreateEndpoint with the same
    name fails until DescribeEndpoint says it is gone."""
    deadline = time.monotonic() + timeout_s
    while describe_or_none(client.describe_endpoint, EndpointName=name) is not None:
        if time.monotonic() >= deadline:
            raise DeployError(f"endpoint {name} still exists {timeout_s:.0f} s after DeleteEndpoint")
        time.sleep(poll_s)


def delete(
    name: str, session: Any = None, region: str | None = None, wait: bool = True, poll_s: float = POLL_S
) -> list[str]:
    """Delete the endpoint (waiting until it is gone), its configs and their models; returns the kinds
    deleted. The configs and models are the endpoint's current ones plus the base names `NAME-config`
    and `NAME-model`, each if present; a missing one is skipped, any other error raised."""
    client = sagemaker_client(session, region)
    endpoint = describe_or_none(client.describe_endpoint, EndpointName=name)
    configs = list(dict.fromkeys([*([endpoint["EndpointConfigName"]] if endpoint else []), f"{name}-config"]))
    models: list[str] = []
    found_configs = []
    for config_name in configs:
        config = describe_or_none(client.describe_endpoint_config, EndpointConfigName=config_name)
        if config is not None:
            found_configs.append(config_name)
            models += [v["ModelName"] for v in config["ProductionVariants"]]
    models = list(dict.fromkeys([*models, f"{name}-model"]))
    deleted: list[str] = []
    if endpoint is not None:
        client.delete_endpoint(EndpointName=name)
        if wait:
            wait_gone(client, name, poll_s)
        deleted.append("endpoint")
    for config_name in found_configs:
        client.delete_endpoint_config(EndpointConfigName=config_name)
        if "endpoint-config" not in deleted:
            deleted.append("endpoint-config")
    for model_name in models:
        if describe_or_none(client.describe_model, ModelName=model_name) is not None:
            client.delete_model(ModelName=model_name)
            if "model" not in deleted:
                deleted.append("model")
    return deleted
