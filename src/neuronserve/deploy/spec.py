"""A SageMaker deployment as plain data: the spec, its checks, and the requests in the API's spelling.

Everything here runs without AWS. The request dicts are what `--dry-run` prints and what the resources
are built from (`endpoint.py` converts them to sagemaker-core shapes), so the printed plan and the sent
requests cannot drift apart. Field names and limits follow botocore's service model
(botocore/data/sagemaker/2017-07-24/service-2.json: `ProductionVariant`, `CreateEndpointConfigInput`,
`CreateModelInput`, `AsyncInferenceConfig`, `VpcConfig`, `Tag`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neuronserve.config.table import VARS
from neuronserve.deploy.instances import check_tensor_parallel
from neuronserve.errors import ConfigError
from neuronserve.host.secrets import ARN_VAR, TOKEN_VAR, check_arn

# A first start may compile for a long time; SageMaker's ceiling for both is 3600 s.
DEFAULT_STARTUP_TIMEOUT_S = 3600
DEFAULT_DOWNLOAD_TIMEOUT_S = 3600
# Room for weights, the staged compiled artifacts and the compiler's work dir, by instance size.
DEFAULT_VOLUME_GB = {"ml.inf2.xlarge": 100, "ml.inf2.8xlarge": 100}
LARGE_VOLUME_GB = 512
# The one Neuron value of ProductionVariant.InferenceAmiVersion; its documentation in botocore's
# sagemaker service-2.json says "Neuron driver version: 2.19". The image's runtime (aws-neuronx-runtime-lib
# 2.29.40.0, Neuron SDK 2.27.1) was released with driver aws-neuronx-dkms 2.25.4.0: docs/DEPLOY.md,
# "Neuron driver".
NEURON_AMI = "al2-ami-sagemaker-inference-neuron-2"
NEURON_AMI_DRIVER = "2.19"
IMAGE_RUNTIME_DRIVER = "2.25.4.0"
# Name pattern and length: service-2.json shapes EndpointName and EndpointConfigName.
_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
NAME_MAX = 63
# Longest suffix a derived name gets: "-config-" + 8 hex digits (see `names`).
_SUFFIX_MAX = len("-config-") + 8


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


def _check_s3(flag: str, uri: str | None, prefix: bool) -> None:
    if uri is None:
        return
    if not uri.startswith("s3://") or len(uri) <= len("s3://") or (prefix and not uri.endswith("/")):
        shape = "an s3:// prefix ending with '/'" if prefix else "an s3://bucket/path URI"
        raise ConfigError(f"{flag} {uri}: must be {shape}")


def validate(spec: DeploySpec) -> int:
    """Everything checkable before an AWS call; returns the tensor-parallel size it checked.

    The checks run in this order, so the first problem of a spec is the one reported."""
    for check in (
        _check_name,
        _check_model_data,
        _check_timeouts,
        _check_volume,
        _check_model_named,
        _check_fleet,
        _check_isolation,
        _check_tags,
        _check_async,
        _check_secrets,
    ):
        check(spec)
    return check_tensor_parallel(spec.env, spec.instance_type)


def _check_name(spec: DeploySpec) -> None:
    """Letters, digits and dashes, short enough for the model and config names built on it."""
    if not _NAME.fullmatch(spec.name) or len(spec.name) > NAME_MAX - _SUFFIX_MAX:
        raise ConfigError(
            f"--name {spec.name!r}: letters, digits and '-' (not first or last), at most "
            f"{NAME_MAX - _SUFFIX_MAX} characters (model and config names add up to {_SUFFIX_MAX})"
        )


def _check_model_data(spec: DeploySpec) -> None:
    """A model-data location SageMaker can copy into /opt/ml/model: a prefix."""
    if spec.model_data_s3 is not None and (
        not spec.model_data_s3.startswith("s3://") or not spec.model_data_s3.endswith("/")
    ):
        raise ConfigError(
            f"--model-data {spec.model_data_s3}: must be an s3:// prefix ending with '/' "
            "(SageMaker copies every key below it into /opt/ml/model)"
        )


def _check_timeouts(spec: DeploySpec) -> None:
    """The container timeouts within what SageMaker accepts."""
    for label, value in (
        ("--startup-timeout", spec.startup_timeout_s),
        ("--download-timeout", spec.download_timeout_s),
    ):
        if not 60 <= value <= 3600:
            raise ConfigError(f"{label} {value}: SageMaker accepts 60 to 3600 seconds")


def _check_volume(spec: DeploySpec) -> None:
    """The storage flags the instance type can take (trn1/trn1n/trn2 have local NVMe only)."""
    if not volume_supported(spec.instance_type):
        if spec.volume_gb is not None:
            raise ConfigError(
                f"--volume-size {spec.volume_gb}: {spec.instance_type} has local NVMe storage only; "
                "SageMaker refuses VolumeSizeInGB for trn1/trn1n/trn2 (drop the flag)"
            )
        if spec.kms_key is not None:
            raise ConfigError(
                f"--kms-key: {spec.instance_type} has no EBS volume to encrypt (local NVMe storage is "
                "encrypted by the instance); SageMaker refuses a storage KmsKeyId there (drop the flag)"
            )
    elif spec.volume is not None and not 1 <= spec.volume <= 512:
        raise ConfigError(f"--volume-size {spec.volume}: SageMaker accepts 1 to 512 GB")


def _check_model_named(spec: DeploySpec) -> None:
    """A model: model data, or a model named in the environment."""
    if spec.model_data_s3 is None and not (
        VARS["SM_VLLM_MODEL"].read(spec.env) or VARS["HF_MODEL_ID"].read(spec.env)
    ):
        raise ConfigError(
            "no model: pass --model-data s3://bucket/prefix/ or set SM_VLLM_MODEL / HF_MODEL_ID"
        )


def _check_fleet(spec: DeploySpec) -> None:
    """The instance count and the VPC config within what SageMaker accepts."""
    if spec.instance_count < 1:
        raise ConfigError(f"--instance-count {spec.instance_count}: need at least 1")
    if (
        bool(spec.subnets) != bool(spec.security_groups)
        or len(spec.subnets) > 16
        or len(spec.security_groups) > 5
    ):
        raise ConfigError(
            "--subnet / --security-group: a VPC config needs 1 to 16 subnets and 1 to 5 security groups"
        )


def _check_isolation(spec: DeploySpec) -> None:
    """An isolated container reaches neither the Hub nor S3: the model must come as model data."""
    if spec.network_isolation:
        if spec.model_data_s3 is None:
            raise ConfigError(
                "--network-isolation: the container cannot reach the Hugging Face Hub; "
                "pass --model-data s3://bucket/prefix/ (SageMaker downloads it before the container starts)"
            )
        if VARS["NEURONSERVE_CACHE_URI"].read(spec.env):
            raise ConfigError(
                "--network-isolation with NEURONSERVE_CACHE_URI: an isolated container cannot reach S3; "
                "put the compiled artifacts under --model-data instead, or drop the isolation"
            )


def _check_tags(spec: DeploySpec) -> None:
    """Tag keys and values within SageMaker's limits."""
    for tag_key, tag_value in spec.tags.items():
        if not 1 <= len(tag_key) <= 128 or len(tag_value) > 256 or tag_key.lower().startswith("aws:"):
            raise ConfigError(f"--tag {tag_key}={tag_value}: keys 1-128 chars (not 'aws:'), values up to 256")


def _check_async(spec: DeploySpec) -> None:
    """The async inference flags: S3 locations, both or none, and the concurrency range."""
    _check_s3("--async-output", spec.async_output_s3, prefix=False)
    _check_s3("--async-failure", spec.async_failure_s3, prefix=False)
    if spec.async_failure_s3 and not spec.async_output_s3:
        raise ConfigError("--async-failure needs --async-output (the endpoint is async only with both)")
    if spec.async_max_concurrent is not None and not 1 <= spec.async_max_concurrent <= 1000:
        raise ConfigError(f"--async-max-concurrent {spec.async_max_concurrent}: SageMaker accepts 1 to 1000")


def _check_secrets(spec: DeploySpec) -> None:
    """The token reference: a Secrets Manager ARN, not beside a clear HF_TOKEN, reachable."""
    arn = spec.hf_token_secret_arn
    in_env = VARS["HF_TOKEN_SECRET_ARN"].read(spec.env)
    if arn is not None:
        check_arn(arn, "--hf-token-secret-arn")
        if in_env and in_env != arn:
            raise ConfigError(f"--hf-token-secret-arn and {ARN_VAR} in the environment differ: keep one")
    elif in_env:
        check_arn(in_env)
    if (arn or in_env) and VARS["HF_TOKEN"].read(spec.env):
        raise ConfigError(
            f"{TOKEN_VAR} in the environment and a token secret ARN: drop {TOKEN_VAR} "
            "(the container reads it from the secret)"
        )
    if (arn or in_env) and spec.network_isolation:
        raise ConfigError(
            "--network-isolation with a token secret ARN: an isolated container cannot reach Secrets "
            "Manager; with --model-data the model needs no token (drop the ARN), or drop the isolation"
        )


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
