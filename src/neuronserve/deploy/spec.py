"""A SageMaker deployment as plain data: the spec and the requests in the API's spelling (its checks:
speccheck.py).

Everything here runs without AWS. The request dicts are what `--dry-run` prints and what the resources
are built from (`endpoint.py` converts them to sagemaker-core shapes), so the printed plan and the sent
requests cannot drift apart. Field names and limits follow botocore's service model
(botocore/data/sagemaker/2017-07-24/service-2.json: `ProductionVariant`, `CreateEndpointConfigInput`,
`CreateModelInput`, `AsyncInferenceConfig`, `VpcConfig`, `Tag`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neuronserve.deploy.driver import NEURON_AMI
from neuronserve.errors import ConfigError
from neuronserve.host.secrets import ARN_VAR
from neuronserve.plan.fit import instances as plan_instances

# A first start may compile for a long time; SageMaker's ceiling for both is 3600 s.
DEFAULT_STARTUP_TIMEOUT_S = 3600
DEFAULT_DOWNLOAD_TIMEOUT_S = 3600
# Room for weights, the staged compiled artifacts and the compiler's work dir, by instance size.
DEFAULT_VOLUME_GB = {"ml.inf2.xlarge": 100, "ml.inf2.8xlarge": 100}
LARGE_VOLUME_GB = 512


def volume_supported(instance_type: str) -> bool:
    """Whether the family takes an EBS volume (`VolumeSizeInGB`) and so a storage `KmsKeyId`.

    trn1, trn1n and trn2 have only local NVMe storage: SageMaker refuses `VolumeSizeInGB` for them.
    Same rule as sagemaker-core 2.27 `sagemaker/core/common_utils.py:1624` `volume_size_supported`
    (families with a "d", g5, g6, g7e, p5, p6-b200, trn1, trn2 -- trn1n starts with trn1) and
    `instance_supports_kms` (common_utils.py:1660, the same test).
    """
    parts = instance_type.split(".")
    if len(parts) == 3 and parts[0] == "ml":
        parts = parts[1:]
    if len(parts) != 2:
        raise ConfigError(f"--instance-type {instance_type}: expected ml.FAMILY.SIZE, e.g. ml.inf2.xlarge")
    family = parts[0]
    no_ebs = ("g5", "g6", "g7e", "p5", "p6-b200", "trn1", "trn2")
    return "d" not in family and not family.startswith(no_ebs)


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
    tags: Mapping[str, str] = field(default_factory=dict)
    subnets: tuple[str, ...] = ()
    security_groups: tuple[str, ...] = ()
    kms_key: str | None = None
    network_isolation: bool = False
    async_output_s3: str | None = None
    async_failure_s3: str | None = None
    async_max_concurrent: int | None = None
    # A Secrets Manager ARN the container reads HF_TOKEN from at start (Environment HF_TOKEN_SECRET_ARN).
    hf_token_secret_arn: str | None = None
    # None: the base names `NAME-model` / `NAME-config`; `update` sets a content hash (`revision_of`).
    revision: str | None = None

    def __post_init__(self) -> None:
        """`inf2.xlarge` and `ml.inf2.xlarge` alike: SageMaker's spelling (an unknown type is left for
        `validate` to refuse, naming the known ones)."""
        key = plan_instances.normalize(self.instance_type)
        if key in plan_instances.INSTANCES:
            object.__setattr__(self, "instance_type", f"ml.{key}")

    @property
    def model_name(self) -> str:
        return f"{self.name}-model" + (f"-{self.revision}" if self.revision else "")

    @property
    def endpoint_config_name(self) -> str:
        return f"{self.name}-config" + (f"-{self.revision}" if self.revision else "")

    @property
    def endpoint_name(self) -> str:
        return self.name

    @property
    def volume(self) -> int | None:
        """GB of EBS volume, or None where the family has none (then `VolumeSizeInGB` is not sent)."""
        if not volume_supported(self.instance_type):
            return None
        return self.volume_gb or DEFAULT_VOLUME_GB.get(self.instance_type, LARGE_VOLUME_GB)


def tag_list(spec: DeploySpec) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(spec.tags.items())]


def container_request(spec: DeploySpec) -> dict[str, Any]:
    """The ContainerDefinition as SageMaker's API spells it (what the tests compare with describe_model)."""
    env = dict(spec.env)
    if spec.hf_token_secret_arn:
        env[ARN_VAR] = spec.hf_token_secret_arn
    container: dict[str, Any] = {"Image": spec.image_uri, "Environment": env}
    if spec.model_data_s3 is not None:
        container["ModelDataSource"] = {
            "S3DataSource": {"S3Uri": spec.model_data_s3, "S3DataType": "S3Prefix", "CompressionType": "None"}
        }
    return container


def model_request(spec: DeploySpec) -> dict[str, Any]:
    """CreateModel's input (`CreateModelInput`)."""
    request: dict[str, Any] = {
        "ModelName": spec.model_name,
        "PrimaryContainer": container_request(spec),
        "ExecutionRoleArn": spec.role_arn,
    }
    if spec.subnets:
        request["VpcConfig"] = {"SecurityGroupIds": list(spec.security_groups), "Subnets": list(spec.subnets)}
    if spec.network_isolation:
        request["EnableNetworkIsolation"] = True
    if spec.tags:
        request["Tags"] = tag_list(spec)
    return request


def variant_request(spec: DeploySpec) -> dict[str, Any]:
    variant: dict[str, Any] = {
        "VariantName": spec.variant,
        "ModelName": spec.model_name,
        "InitialInstanceCount": spec.instance_count,
        "InstanceType": spec.instance_type,
    }
    if spec.volume is not None:
        variant["VolumeSizeInGB"] = spec.volume
    variant.update(
        {
            "ModelDataDownloadTimeoutInSeconds": spec.download_timeout_s,
            "ContainerStartupHealthCheckTimeoutInSeconds": spec.startup_timeout_s,
            "InferenceAmiVersion": NEURON_AMI,
        }
    )
    return variant


def config_request(spec: DeploySpec) -> dict[str, Any]:
    """CreateEndpointConfig's input (`CreateEndpointConfigInput`)."""
    request: dict[str, Any] = {
        "EndpointConfigName": spec.endpoint_config_name,
        "ProductionVariants": [variant_request(spec)],
    }
    if spec.kms_key:
        request["KmsKeyId"] = spec.kms_key
    if spec.async_output_s3:
        output: dict[str, Any] = {"S3OutputPath": spec.async_output_s3}
        if spec.async_failure_s3:
            output["S3FailurePath"] = spec.async_failure_s3
        if spec.kms_key:
            output["KmsKeyId"] = spec.kms_key
        async_config: dict[str, Any] = {"OutputConfig": output}
        if spec.async_max_concurrent is not None:
            async_config["ClientConfig"] = {"MaxConcurrentInvocationsPerInstance": spec.async_max_concurrent}
        request["AsyncInferenceConfig"] = async_config
    if spec.tags:
        request["Tags"] = tag_list(spec)
    return request


def revision_of(spec: DeploySpec) -> str:
    """8 hex digits of the model and config requests (names left out): equal specs give equal names,
    so `update` with nothing changed is a no-op and every change gets a new endpoint config name."""
    base = DeploySpec(**{**spec.__dict__, "revision": None})
    content = json.dumps([model_request(base), config_request(base)], sort_keys=True)
    return hashlib.sha256(content.encode()).hexdigest()[:8]
