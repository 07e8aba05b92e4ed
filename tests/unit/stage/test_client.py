"""stage/client.py: the S3 client is built from the AWS rows (endpoint, region, keys over the profile,
pool size), boto3 stays out of the CLI parser, and every S3 or disk failure becomes one StageError
naming the URI and the fix. Real botocore clients and exception objects; no request is sent."""

from __future__ import annotations

import errno
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, ProfileNotFound

from neuronserve.errors import StageError
from neuronserve.stage.client import disk_full, is_disk_full_text, make_client, translate

URI = "s3://bucket/model/"


def client_error(code: str, status: int = 400, **headers: str) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": f"the server says {code}"},
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers},
    }
    return ClientError(response, "GetObject")


def test_the_client_takes_the_endpoint_region_and_pool_from_the_rows() -> None:
    client = make_client(
        {
            "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
            "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9",
            "AWS_DEFAULT_REGION": "eu-west-1",
            "AWS_ACCESS_KEY_ID": "AKIDTEST",
            "AWS_SECRET_ACCESS_KEY": "secret",
        },
        pool=7,
    )
    assert client.meta.endpoint_url == "http://127.0.0.1:9"  # S3's own endpoint over the general one
    assert client.meta.region_name == "eu-west-1"
    assert client.meta.config.max_pool_connections == 7
    assert client.meta.config.s3 == {"addressing_style": "path"}  # an S3-compatible store at a URL


def test_without_an_endpoint_the_client_is_aws_s3_with_its_own_addressing() -> None:
    client = make_client({"AWS_REGION": "us-east-2", "AWS_DEFAULT_REGION": "eu-west-1"})
    assert client.meta.region_name == "us-east-2"  # AWS_REGION over AWS_DEFAULT_REGION
    assert "amazonaws.com" in client.meta.endpoint_url
    assert not client.meta.config.s3


def test_a_profile_is_used_only_without_keys() -> None:
    """Keys in the environment win: the profile is not even looked up (a missing one is no error)."""
    env = {"AWS_PROFILE": "neuronserve-no-such-profile", "AWS_REGION": "us-east-1"}
    with pytest.raises(ProfileNotFound):
        make_client(env)
    make_client({**env, "AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "secret"})


@pytest.mark.parametrize(
    ("err", "says"),
    [
        (NoCredentialsError(), "no AWS credentials to read s3://bucket/model/: attach an IAM role"),
        (
            EndpointConnectionError(endpoint_url="http://127.0.0.1:9"),
            "cannot reach the S3 endpoint for s3://bucket/model/",
        ),
        (client_error("NoSuchBucket", 404), "bucket of s3://bucket/model/ does not exist"),
        (client_error("NoSuchKey", 404), "s3://bucket/model/ does not exist: check the key/prefix"),
        (
            client_error("PermanentRedirect", 301, **{"x-amz-bucket-region": "ap-south-1"}),
            "is in region ap-south-1: wrong region; set AWS_REGION=ap-south-1",
        ),
        (client_error("AccessDenied", 403), "access denied to s3://bucket/model/: the IAM role"),
        (client_error("ExpiredToken", 400), "the AWS credentials were rejected for s3://bucket/model/"),
        (client_error("SlowDown", 503), "S3 error on s3://bucket/model/: SlowDown: the server says SlowDown"),
        (OSError(errno.ENOSPC, "No space left on device", "/w/x"), "disk full while staging s3://bucket"),
        (
            OSError(errno.EFBIG, "File too large"),
            "disk full while staging s3://bucket/model/ (File too large)",
        ),
        (ValueError("odd"), "staging s3://bucket/model/ failed: ValueError: odd"),
    ],
)
def test_each_failure_becomes_a_stage_error_naming_the_uri_and_the_fix(err: BaseException, says: str) -> None:
    translated = translate(err, URI)
    assert isinstance(translated, StageError)
    assert says in str(translated)


def test_a_stage_error_passes_through_unchanged() -> None:
    err = StageError("already worded")
    assert translate(err, URI) is err


def test_full_disk_texts_of_s5cmd_are_recognised() -> None:
    assert is_disk_full_text("write /w/x: No space left on device")
    assert is_disk_full_text("FILE TOO LARGE")
    assert not is_disk_full_text("connection reset by peer")
    assert "point NEURONSERVE_WORK_DIR at one" in str(disk_full(URI, "no space"))


def test_cli_parser_does_not_import_the_s3_stack() -> None:
    """`neuronserve plan` builds the whole parser: the stage/cache commands must keep boto3 out of it."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys; from neuronserve import cli; cli.build_parser(); "
        "heavy = ('boto3', 'botocore', 's3transfer', 'neuronserve.stage.transfer'); "
        "bad = [m for m in heavy if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    src = str(Path(__file__).resolve().parents[3] / "src")
    proc = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": src}, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
