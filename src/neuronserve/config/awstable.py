"""Rows of the settings table for the AWS SDK's own variables, which neuronserve reads on its behalf.

Why rows for another program's variables: the S3 client (staging, the compile cache), s5cmd and the
Secrets Manager client are built from the environment mapping the CLI read once, not from the process
environment, so each of these names is read here, through its row, like every other setting. The names
and their precedence (a service's own endpoint over AWS_ENDPOINT_URL, AWS_REGION over
AWS_DEFAULT_REGION) are the SDK's, documented in the AWS SDKs and Tools Reference Guide
(https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html and
https://docs.aws.amazon.com/sdkref/latest/guide/feature-region.html). Credential values are never
logged: config/aws.py keeps them out of its repr, and redact.py masks the names.
"""

from __future__ import annotations

from neuronserve.config.var import AWS, Var

AWS_VARS: tuple[Var, ...] = (
    Var(
        "AWS_REGION",
        "",
        None,
        AWS,
        "Region of the S3 bucket (staging, compile cache) and of Secrets Manager",
        default_doc="AWS_DEFAULT_REGION, else the SDK's configuration",
    ),
    Var("AWS_DEFAULT_REGION", "", None, AWS, "Region when AWS_REGION is not set"),
    Var(
        "AWS_PROFILE",
        "",
        None,
        AWS,
        "Profile of the shared AWS config files, used when no AWS_ACCESS_KEY_ID is set",
        default_doc="the SDK's default chain (instance or task role)",
    ),
    Var(
        "AWS_ACCESS_KEY_ID",
        "",
        None,
        AWS,
        "Access key for S3 and Secrets Manager (with AWS_SECRET_ACCESS_KEY); never logged",
        default_doc="the SDK's default chain (instance or task role)",
    ),
    Var("AWS_SECRET_ACCESS_KEY", "", None, AWS, "Secret of AWS_ACCESS_KEY_ID; never logged"),
    Var("AWS_SESSION_TOKEN", "", None, AWS, "Session token of temporary credentials; never logged"),
    Var(
        "AWS_ENDPOINT_URL",
        "",
        None,
        AWS,
        "Endpoint of every AWS service neuronserve calls (an S3-compatible store, a test server)",
        default_doc="the service's regional endpoint",
    ),
    Var(
        "AWS_ENDPOINT_URL_S3",
        "",
        None,
        AWS,
        "S3 endpoint (over AWS_ENDPOINT_URL), for the Python engine, uploads and s5cmd's --endpoint-url",
        default_doc="AWS_ENDPOINT_URL",
    ),
    Var(
        "AWS_ENDPOINT_URL_SECRETS_MANAGER",
        "",
        None,
        AWS,
        "Secrets Manager endpoint (over AWS_ENDPOINT_URL) for HF_TOKEN_SECRET_ARN",
        default_doc="AWS_ENDPOINT_URL",
    ),
)
