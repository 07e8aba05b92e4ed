"""The AWS settings the S3 and Secrets Manager clients are built from, read through their rows.

One reading (config/awstable.py rows) for every client: staging's S3 client and s5cmd
(stage/client.py, stage/s5cmdproc.py) and the Secrets Manager client of HF_TOKEN_SECRET_ARN
(host/secrets.py). A service's own endpoint wins over AWS_ENDPOINT_URL and AWS_REGION over
AWS_DEFAULT_REGION, as in the AWS SDKs (https://docs.aws.amazon.com/sdkref/latest/guide/
feature-ss-endpoints.html). The credential fields are left out of the repr, so a logged settings
object never shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from neuronserve.config.table import VARS


@dataclass(frozen=True)
class AwsSettings:
    region: str | None = None  # AWS_REGION, else AWS_DEFAULT_REGION
    profile: str | None = None  # AWS_PROFILE
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    s3_endpoint: str | None = None  # AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL
    secrets_endpoint: str | None = None  # AWS_ENDPOINT_URL_SECRETS_MANAGER, else AWS_ENDPOINT_URL

    def credentials(self) -> dict[str, str]:
        """The keys given in the environment, as boto3's Session takes them (empty: the default chain)."""
        given = {
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "aws_session_token": self.session_token,
        }
        return {k: v for k, v in given.items() if v}


def parse_aws(environ: Mapping[str, str]) -> AwsSettings:
    """The AWS settings `environ` gives (none of these rows refuses a value: each is text)."""
    endpoint = VARS["AWS_ENDPOINT_URL"].read(environ)
    return AwsSettings(
        region=VARS["AWS_REGION"].read(environ) or VARS["AWS_DEFAULT_REGION"].read(environ),
        profile=VARS["AWS_PROFILE"].read(environ),
        access_key_id=VARS["AWS_ACCESS_KEY_ID"].read(environ),
        secret_access_key=VARS["AWS_SECRET_ACCESS_KEY"].read(environ),
        session_token=VARS["AWS_SESSION_TOKEN"].read(environ),
        s3_endpoint=VARS["AWS_ENDPOINT_URL_S3"].read(environ) or endpoint,
        secrets_endpoint=VARS["AWS_ENDPOINT_URL_SECRETS_MANAGER"].read(environ) or endpoint,
    )
