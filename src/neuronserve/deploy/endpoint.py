"""Create, describe and delete a SageMaker real-time endpoint for the image, with sagemaker-core resources.

The spec is plain data (built and validated without AWS); `deploy` makes three calls: Model (image, the
model as an uncompressed S3 prefix, the environment), EndpointConfig (one variant with Neuron-sized
timeouts and volume) and Endpoint. Names derive from one base name so `delete` can find all three.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from neuronserve.deploy.instances import check_tensor_parallel
from neuronserve.errors import ConfigError

# A first start may compile for a long time; SageMaker's ceiling for both is 3600 s.
DEFAULT_STARTUP_TIMEOUT_S = 3600
DEFAULT_DOWNLOAD_TIMEOUT_S = 3600
# Room for weights, the staged compiled artifacts and the compiler's work dir, by instance size.
DEFAULT_VOLUME_GB = {"ml.inf2.xlarge": 100, "ml.inf2.8xlarge": 100, "ml.trn1.2xlarge": 100}
LARGE_VOLUME_GB = 512
NEURON_AMI = "al2-ami-sagemaker-inference-neuron-2"


@dataclass(frozen=True)
class DeploySpec:
    name: str
    image_uri: str
    role_arn: str
    instance_type: str
    env: Mapping[str, str] = field(default_factory=dict)
    model_data_s3: str | None = None
    instance_count: int = 1
    startup_timeout_s: int = DEFAULT_STARTUP_TIMEOUT_S
    download_timeout_s: int = DEFAULT_DOWNLOAD_TIMEOUT_S
    volume_gb: int | None = None
    variant: str = "AllTraffic"

    @property
    def model_name(self) -> str:
        return f"{self.name}-model"

    @property
    def endpoint_config_name(self) -> str:
        return f"{self.name}-config"

    @property
    def endpoint_name(self) -> str:
        return self.name

    @property
    def volume(self) -> int:
        return self.volume_gb or DEFAULT_VOLUME_GB.get(self.instance_type, LARGE_VOLUME_GB)


def validate(spec: DeploySpec) -> int:
    """Everything checkable before an AWS call; returns the tensor-parallel size it checked."""
    if spec.model_data_s3 is not None and (
        not spec.model_data_s3.startswith("s3://") or not spec.model_data_s3.endswith("/")
    ):
        raise ConfigError(
            f"--model-data {spec.model_data_s3}: must be an s3:// prefix ending with '/' "
            "(SageMaker copies every key below it into /opt/ml/model)"
        )
    for label, value in (
        ("--startup-timeout", spec.startup_timeout_s),
        ("--download-timeout", spec.download_timeout_s),
    ):
        if not 60 <= value <= 3600:
            raise ConfigError(f"{label} {value}: SageMaker accepts 60 to 3600 seconds")
    if not 1 <= spec.volume <= 512:
        raise ConfigError(f"--volume-size {spec.volume}: SageMaker accepts 1 to 512 GB")
    if spec.model_data_s3 is None and not (spec.env.get("SM_VLLM_MODEL") or spec.env.get("HF_MODEL_ID")):
        raise ConfigError(
            "no model: pass --model-data s3://bucket/prefix/ or set SM_VLLM_MODEL / HF_MODEL_ID"
        )
    return check_tensor_parallel(spec.env, spec.instance_type)


def container_request(spec: DeploySpec) -> dict[str, Any]:
    """The ContainerDefinition as SageMaker's API spells it (what the tests compare with describe_model)."""
    container: dict[str, Any] = {"Image": spec.image_uri, "Environment": dict(spec.env)}
    if spec.model_data_s3 is not None:
        container["ModelDataSource"] = {
            "S3DataSource": {"S3Uri": spec.model_data_s3, "S3DataType": "S3Prefix", "CompressionType": "None"}
        }
    return container


def variant_request(spec: DeploySpec) -> dict[str, Any]:
    return {
        "VariantName": spec.variant,
        "ModelName": spec.model_name,
        "InitialInstanceCount": spec.instance_count,
        "InstanceType": spec.instance_type,
        "VolumeSizeInGB": spec.volume,
        "ModelDataDownloadTimeoutInSeconds": spec.download_timeout_s,
        "ContainerStartupHealthCheckTimeoutInSeconds": spec.startup_timeout_s,
        "InferenceAmiVersion": NEURON_AMI,
    }


def deploy(spec: DeploySpec, session: Any = None, region: str | None = None, wait: bool = False) -> Any:
    """Create model, endpoint config and endpoint; returns the sagemaker-core Endpoint resource."""
    validate(spec)
    from sagemaker.core.resources import Endpoint, EndpointConfig, Model
    from sagemaker.core.shapes import (
        ContainerDefinition,
        ModelDataSource,
        ProductionVariant,
        S3ModelDataSource,
    )

    data_source = None
    if spec.model_data_s3 is not None:
        data_source = ModelDataSource(
            s3_data_source=S3ModelDataSource(
                s3_uri=spec.model_data_s3, s3_data_type="S3Prefix", compression_type="None"
            )
        )
    container_args: dict[str, Any] = {"image": spec.image_uri, "environment": dict(spec.env)}
    if data_source is not None:
        container_args["model_data_source"] = data_source
    Model.create(
        model_name=spec.model_name,
        primary_container=ContainerDefinition(**container_args),
        execution_role_arn=spec.role_arn,
        session=session,
        region=region,
    )
    EndpointConfig.create(
        endpoint_config_name=spec.endpoint_config_name,
        production_variants=[
            ProductionVariant(
                variant_name=spec.variant,
                model_name=spec.model_name,
                initial_instance_count=spec.instance_count,
                instance_type=spec.instance_type,
                volume_size_in_gb=spec.volume,
                model_data_download_timeout_in_seconds=spec.download_timeout_s,
                container_startup_health_check_timeout_in_seconds=spec.startup_timeout_s,
                inference_ami_version=NEURON_AMI,
            )
        ],
        session=session,
        region=region,
    )
    endpoint = Endpoint.create(
        endpoint_name=spec.endpoint_name,
        endpoint_config_name=spec.endpoint_config_name,
        session=session,
        region=region,
    )
    if wait:
        endpoint.wait_for_status("InService")
    return endpoint


def describe(name: str, session: Any = None, region: str | None = None) -> dict[str, Any]:
    """Endpoint status and its variant, as a plain dict for printing."""
    from sagemaker.core.resources import Endpoint

    endpoint = Endpoint.get(endpoint_name=name, session=session, region=region)
    return {
        "EndpointName": endpoint.endpoint_name,
        "EndpointStatus": endpoint.endpoint_status,
        "EndpointConfigName": endpoint.endpoint_config_name,
    }


def delete(name: str, session: Any = None, region: str | None = None) -> list[str]:
    """Delete endpoint, endpoint config and model (each if present); returns what was deleted."""
    from botocore.exceptions import ClientError
    from sagemaker.core.resources import Endpoint, EndpointConfig, Model

    deleted: list[str] = []
    getters: list[tuple[str, Callable[[], Any]]] = [
        ("endpoint", lambda: Endpoint.get(endpoint_name=name, session=session, region=region)),
        (
            "endpoint-config",
            lambda: EndpointConfig.get(endpoint_config_name=f"{name}-config", session=session, region=region),
        ),
        ("model", lambda: Model.get(model_name=f"{name}-model", session=session, region=region)),
    ]
    for kind, getter in getters:
        try:
            resource = getter()
        except ClientError as err:
            if "ValidationException" in str(err) or "ResourceNotFound" in str(err):
                continue
            raise
        resource.delete()
        deleted.append(kind)
    return deleted
