"""HF_TOKEN from AWS Secrets Manager at start (`HF_TOKEN_SECRET_ARN`), so no token sits in plain text in
a SageMaker Model's `Environment` (readable by anyone with sagemaker:DescribeModel) or an ECS task
definition.

Called once by `neuronserve serve`, `stage` and `compile` (a stage initContainer or a compile Job fetches a
gated hub model too), before the plan, on the mapping the CLI read from the environment:
the token joins that mapping as `HF_TOKEN` and reaches the hub download and the engine by the same
inheritance a plain HF_TOKEN takes. Every printer of the mapping already masks HF_TOKEN (redact.py);
this module logs only the ARN.

The secret's value (`SecretString`) is the token itself, or a JSON object with an `HF_TOKEN` member
(the shape the console's "key/value" secret type stores), so one secret can serve ECS's
`valueFrom ARN:HF_TOKEN::` and this path alike. A binary secret is refused: a token is text.

boto3 is imported inside the function (`neuronserve plan` never pays for it). The endpoint follows
boto3's standard variables for the service (`AWS_ENDPOINT_URL_SECRETS_MANAGER`, then
`AWS_ENDPOINT_URL`), read from the mapping like stage/client.py does for S3, so a test server or a VPC
endpoint needs no code change; the region is the ARN's own (a secret lives in one region).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from neuronserve.config.aws import parse_aws
from neuronserve.config.table import VARS
from neuronserve.errors import ConfigError

log = logging.getLogger("neuronserve.secrets")

ARN_VAR = "HF_TOKEN_SECRET_ARN"
TOKEN_VAR = "HF_TOKEN"  # noqa: S105 (a variable's name)
# arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME-6RANDOM (IAM's ARN format for Secrets Manager).
SECRETS_MANAGER_ARN = re.compile(
    r"arn:aws(?:-[a-z]+)*:secretsmanager:(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+):\d{12}:secret:[A-Za-z0-9/_+=.@-]+"
)


def check_arn(arn: str, name: str = ARN_VAR) -> str:
    """The region of a Secrets Manager secret ARN, or the ConfigError naming `name` and the shape."""
    m = SECRETS_MANAGER_ARN.fullmatch(arn)
    if m is None:
        shown = repr(arn) if arn.startswith("arn:") else "(value not shown: it may be the secret itself)"
        raise ConfigError(
            f"{name}={shown} is not a Secrets Manager secret ARN: expected "
            "arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME (the secret's ARN from `aws secretsmanager "
            "describe-secret --secret-id NAME --query ARN`)",
            (name,),
        )
    return m.group("region")


def with_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ`, plus HF_TOKEN read from the secret HF_TOKEN_SECRET_ARN names (when it names one)."""
    out = dict(environ)
    arn = VARS["HF_TOKEN_SECRET_ARN"].read(out)
    if not arn:
        return out
    region = check_arn(arn)
    if VARS["HF_TOKEN"].read(out):
        raise ConfigError(
            f"both {TOKEN_VAR} and {ARN_VAR} are set: keep {ARN_VAR} (the token stays out of the "
            f"environment) and unset {TOKEN_VAR}",
            (TOKEN_VAR, ARN_VAR),
        )
    out[TOKEN_VAR] = token_from(_secret_string(out, arn, region), arn)
    log.info("%s: read from Secrets Manager %s (%s)", TOKEN_VAR, arn, ARN_VAR)
    return out


def token_from(secret: str, arn: str) -> str:
    """The token in a SecretString: the text itself, or the `HF_TOKEN` member of a JSON object."""
    text = secret.strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        value = doc.get(TOKEN_VAR) if isinstance(doc, dict) else None
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(
                f"{ARN_VAR}: the secret {arn} holds a JSON object without a string {TOKEN_VAR!r} member: "
                f'store the token alone, or {{"{TOKEN_VAR}": "hf_..."}}',
                (ARN_VAR,),
            )
        text = value.strip()
    if not text:
        raise ConfigError(
            f"{ARN_VAR}: the secret {arn} is empty: store the Hugging Face token in it", (ARN_VAR,)
        )
    return text


def _client(environ: Mapping[str, str], region: str) -> Any:
    import boto3  # noqa: PLC0415
    from botocore.config import Config  # noqa: PLC0415

    aws = parse_aws(environ)
    creds: dict[str, Any] = dict(aws.credentials())
    profile = aws.profile if not creds else None
    session = boto3.session.Session(region_name=region, profile_name=profile, **creds)
    endpoint = aws.secrets_endpoint
    config = Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=10, read_timeout=30)
    return session.client("secretsmanager", endpoint_url=endpoint, config=config)


def _secret_string(environ: Mapping[str, str], arn: str, region: str) -> str:
    """GetSecretValue's SecretString; each AWS refusal becomes one ConfigError naming its fix."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError  # noqa: PLC0415

    try:
        answer = _client(environ, region).get_secret_value(SecretId=arn)
    except ClientError as err:
        raise _refusal(err, arn) from None
    except NoCredentialsError:
        raise ConfigError(
            f"{ARN_VAR}: no AWS credentials to read {arn}: give the container a role (SageMaker execution "
            "role, ECS task role) with secretsmanager:GetSecretValue on it",
            (ARN_VAR,),
        ) from None
    except BotoCoreError as err:
        raise ConfigError(
            f"{ARN_VAR}: cannot reach Secrets Manager in {region} for {arn} ({err}): check the network "
            "(a VPC endpoint for secretsmanager or a NAT) and AWS_ENDPOINT_URL_SECRETS_MANAGER",
            (ARN_VAR,),
        ) from None
    secret = answer.get("SecretString")
    if not isinstance(secret, str):
        raise ConfigError(
            f"{ARN_VAR}: the secret {arn} is binary (SecretBinary): store the token as a secret string",
            (ARN_VAR,),
        )
    return secret


def _refusal(err: Any, arn: str) -> ConfigError:
    code = str(err.response.get("Error", {}).get("Code", ""))
    if code in ("AccessDeniedException", "AccessDenied"):
        why = (
            "access denied: the role the container runs as (SageMaker execution role, ECS task role) "
            f"needs secretsmanager:GetSecretValue on {arn}, and kms:Decrypt on the secret's key when it "
            "is a customer managed key (docs/DEPLOY.md, 'IAM')"
        )
    elif code == "ResourceNotFoundException":
        why = f"no secret {arn} in this account and region: check the ARN (aws secretsmanager list-secrets)"
    elif code == "DecryptionFailure":
        why = f"Secrets Manager cannot decrypt {arn}: the role needs kms:Decrypt on the secret's KMS key"
    elif code == "InvalidRequestException":
        why = f"the secret {arn} is scheduled for deletion or has no current version: restore it"
    else:
        message = err.response.get("Error", {}).get("Message", "")
        why = f"Secrets Manager refused GetSecretValue on {arn}: {code}: {message}"
    return ConfigError(f"{ARN_VAR}: {why}", (ARN_VAR,))
