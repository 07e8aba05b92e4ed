"""The S3 client (endpoint, region, retries, pool size) and the translation of S3 failures into fixes.

boto3 is imported inside functions: `neuronserve plan` must not pay for it. The endpoint follows the
standard variables (`AWS_ENDPOINT_URL_S3`, then `AWS_ENDPOINT_URL`), so a test server or an
S3-compatible store needs no code change. Credentials come from the mapping when given there, else
from boto3's default chain (instance/task role); they are never logged. Every AWS_* variable is read
through its row (config/awstable.py) by config/aws.py.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from typing import Any

from neuronserve.config.aws import AwsSettings, parse_aws
from neuronserve.errors import StageError


def make_client(environ: Mapping[str, str], *, pool: int = 32) -> Any:
    """The S3 client `environ` configures (its AWS_* rows, config/aws.py): see `client_for`."""
    return client_for(parse_aws(environ), pool=pool)


def client_for(aws: AwsSettings, *, pool: int = 32) -> Any:
    """A botocore S3 client: adaptive retries (throttling, 5xx, dropped connections), `pool` sockets.

    Keys given in the environment win; else the profile; else boto3's default chain (the role)."""
    import boto3  # noqa: PLC0415
    from botocore.config import Config  # noqa: PLC0415

    keys: dict[str, Any] = dict(aws.credentials())
    profile = aws.profile if not keys else None
    session = boto3.session.Session(region_name=aws.region, profile_name=profile, **keys)
    config = Config(
        retries={"max_attempts": 8, "mode": "adaptive"},
        max_pool_connections=pool,
        connect_timeout=10,
        read_timeout=60,
        tcp_keepalive=True,
        s3={"addressing_style": "path"} if aws.s3_endpoint else {},
    )
    return session.client("s3", endpoint_url=aws.s3_endpoint, config=config)


# No space, over the file-size limit (RLIMIT_FSIZE), over the quota: the same fix for the user.
_DISK_FULL = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})


# The same conditions as s5cmd (Go) words them in its error lines.
_DISK_FULL_TEXT = ("no space left on device", "file too large", "disk quota exceeded")


def disk_full(uri: str, detail: str) -> StageError:
    return StageError(
        f"disk full while staging {uri} ({detail}): nothing partial is used; use a larger volume "
        "(SageMaker VolumeSizeInGB / ECS ephemeral storage) or point NEURONSERVE_WORK_DIR at one"
    )


def is_disk_full_text(message: str) -> bool:
    return any(t in message.lower() for t in _DISK_FULL_TEXT)


def translate(err: BaseException, uri: str) -> StageError:
    """Turn a botocore/OS error into a StageError that names the URI and the likely fix."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError  # noqa: PLC0415

    if isinstance(err, StageError):
        return err
    if isinstance(err, NoCredentialsError):
        return StageError(
            f"no AWS credentials to read {uri}: attach an IAM role to the instance/task "
            "or set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
        )
    if isinstance(err, EndpointConnectionError):
        return StageError(
            f"cannot reach the S3 endpoint for {uri} ({err}); check AWS_REGION, "
            "AWS_ENDPOINT_URL_S3 and the network (VPC endpoint / NAT)"
        )
    if isinstance(err, ClientError):
        info = err.response.get("Error", {})
        code = str(info.get("Code", ""))
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        headers = err.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        region = headers.get("x-amz-bucket-region") or info.get("Region")
        if code in ("NoSuchBucket",):
            return StageError(f"bucket of {uri} does not exist: check the bucket name in the URI")
        if code in ("NoSuchKey", "404", "NotFound"):
            return StageError(f"{uri} does not exist: check the key/prefix (and its trailing slash)")
        if code in (
            "PermanentRedirect",
            "AuthorizationHeaderMalformed",
            "301",
            "IllegalLocationConstraint",
        ) or (status == 301):
            where = f"region {region}" if region else "another region"
            fix = f"set AWS_REGION={region}" if region else "set AWS_REGION to the bucket's region"
            return StageError(f"the bucket of {uri} is in {where}: wrong region; {fix}")
        if code in ("AccessDenied", "403", "Forbidden", "AllAccessDisabled") or status == 403:
            return StageError(
                f"access denied to {uri}: the IAM role (or credentials) needs s3:ListBucket on the bucket "
                "and s3:GetObject on the keys (s3:PutObject to write the cache); "
                "check the role and bucket policy"
            )
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"):
            return StageError(f"the AWS credentials were rejected for {uri} ({code}): refresh or fix them")
        return StageError(f"S3 error on {uri}: {code or status}: {info.get('Message', '')}".rstrip(": "))
    if isinstance(err, OSError) and err.errno in _DISK_FULL:
        return disk_full(uri, f"{err.strerror}{', ' + str(err.filename) if err.filename else ''}")
    return StageError(f"staging {uri} failed: {type(err).__name__}: {err}")
