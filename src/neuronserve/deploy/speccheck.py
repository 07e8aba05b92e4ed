"""The checks of a SageMaker deployment (deploy/spec.py) made before any AWS call, each naming its flag,
ending with the container's own plan on the instance (deploy/validate.py: the check ECS and EKS make too).

Limits are botocore's service model's (botocore/data/sagemaker/2017-07-24/service-2.json): names
(`EndpointName`, `EndpointConfigName`), timeouts, `VolumeSizeInGB`, `VpcConfig`, `Tag`,
`AsyncInferenceConfig`.
"""

from __future__ import annotations

import re

from neuronserve.config.table import VARS
from neuronserve.deploy.spec import DeploySpec, volume_supported
from neuronserve.deploy.validate import SAGEMAKER, Checked, instance_name, plan_check
from neuronserve.errors import ConfigError
from neuronserve.host.secrets import ARN_VAR, TOKEN_VAR, check_arn

# Name pattern and length: service-2.json shapes EndpointName and EndpointConfigName.
_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
NAME_MAX = 63
# Longest suffix a derived name gets: "-config-" + 8 hex digits (see `names`).
_SUFFIX_MAX = len("-config-") + 8


def _check_s3(flag: str, uri: str | None, prefix: bool) -> None:
    if uri is None:
        return
    if not uri.startswith("s3://") or len(uri) <= len("s3://") or (prefix and not uri.endswith("/")):
        shape = "an s3:// prefix ending with '/'" if prefix else "an s3://bucket/path URI"
        raise ConfigError(f"{flag} {uri}: must be {shape}")


def validate(spec: DeploySpec, model_config: str | None = None) -> Checked:
    """Everything checkable before an AWS call, ending with the container's own plan on the instance
    (deploy/validate.py, the check ECS and EKS make too); returns that plan.

    The checks run in this order, so the first problem of a spec is the one reported."""
    instance_name(spec.instance_type, SAGEMAKER)
    for check in (
        _check_name,
        _check_model_data,
        _check_timeouts,
        _check_volume,
        _check_fleet,
        _check_isolation,
        _check_tags,
        _check_async,
        _check_secrets,
    ):
        check(spec)
    env = dict(spec.env)
    if spec.hf_token_secret_arn:
        env[ARN_VAR] = spec.hf_token_secret_arn
    return plan_check(
        env,
        spec.instance_type,
        SAGEMAKER,
        model_mounted=spec.model_data_s3 is not None,
        locations={
            "--model-data": spec.model_data_s3,
            "--async-output": spec.async_output_s3,
            "--async-failure": spec.async_failure_s3,
        },
        model_config=model_config,
    )


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
