"""The AWS region of a deploy tool, taken the way the AWS CLI takes it: `--region`, else AWS_REGION, else
AWS_DEFAULT_REGION, else the profile's `region` in the shared config file.

Why not boto3's own default: botocore reads AWS_DEFAULT_REGION and the config file but not AWS_REGION
(botocore/configprovider.py, the `region` entry of BOTOCORE_DEFAULT_SESSION_VARIABLES), while the AWS
CLI v2 and the SDKs give AWS_REGION precedence (https://docs.aws.amazon.com/sdkref/latest/guide/
feature-region.html). And never a silent default: a task definition rendered for us-east-1 by default
sends its logs to a region the user never named (`awslogs-region`). Where a region is needed and none is
found, the tool says so and exits 2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from neuronserve.config.aws import parse_aws
from neuronserve.errors import ConfigError

_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")
_HOW = (
    "pass --region REGION, or set AWS_REGION (or AWS_DEFAULT_REGION), or give the profile a region "
    "(aws configure set region REGION)"
)


def profile_region(profile: str | None) -> str | None:
    """The `region` of `profile` (None: the default profile) in the shared config files; no network."""
    import botocore.exceptions
    import botocore.session

    try:
        session = botocore.session.Session(profile=profile)
        region = session.get_scoped_config().get("region")
    except botocore.exceptions.ProfileNotFound:
        raise ConfigError(
            f"profile {profile!r} (--profile or AWS_PROFILE): not in the AWS config files",
            ("--profile", "AWS_PROFILE"),
        ) from None
    return str(region) if region else None


def resolve_region(flag: str | None, environ: Mapping[str, str], profile: str | None = None) -> str | None:
    """The region by the AWS CLI's order, checked for its shape; None when nothing names one."""
    aws = parse_aws(environ)
    for origin, value in (("--region", flag), ("AWS_REGION / AWS_DEFAULT_REGION", aws.region)):
        if value:
            return _checked(value, origin)
    region = profile_region(profile or aws.profile)
    return _checked(region, "the profile's region") if region else None


def require_region(flag: str | None, environ: Mapping[str, str], profile: str | None = None) -> str:
    """resolve_region, or the ConfigError saying how to name one."""
    region = resolve_region(flag, environ, profile)
    if region is None:
        raise ConfigError(f"no AWS region: {_HOW}", ("--region", "AWS_REGION", "AWS_DEFAULT_REGION"))
    return region


def _checked(region: str, origin: str) -> str:
    if not _REGION.fullmatch(region):
        raise ConfigError(f"{origin} {region!r} is not an AWS region (e.g. us-east-1): {_HOW}", (origin,))
    return region
