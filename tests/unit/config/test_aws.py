"""config/aws.py: the AWS settings come from their rows with the SDK's precedence (a service's own
endpoint over AWS_ENDPOINT_URL, AWS_REGION over AWS_DEFAULT_REGION), and no credential shows in a repr."""

from __future__ import annotations

from neuronserve.config.aws import AwsSettings, parse_aws


def test_nothing_set_is_nothing_given() -> None:
    aws = parse_aws({})
    assert aws == AwsSettings()
    assert aws.credentials() == {}


def test_each_service_endpoint_wins_over_the_general_one() -> None:
    general = {"AWS_ENDPOINT_URL": "http://general:1"}
    assert parse_aws(general).s3_endpoint == parse_aws(general).secrets_endpoint == "http://general:1"
    both = parse_aws(
        {
            **general,
            "AWS_ENDPOINT_URL_S3": "http://s3:2",
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": " http://sm:3 ",
        }
    )
    assert (both.s3_endpoint, both.secrets_endpoint) == ("http://s3:2", "http://sm:3")


def test_aws_region_wins_over_the_default_region_and_blank_is_unset() -> None:
    assert parse_aws({"AWS_DEFAULT_REGION": "eu-west-1"}).region == "eu-west-1"
    assert parse_aws({"AWS_REGION": "us-east-2", "AWS_DEFAULT_REGION": "eu-west-1"}).region == "us-east-2"
    assert parse_aws({"AWS_REGION": "  ", "AWS_DEFAULT_REGION": "eu-west-1"}).region == "eu-west-1"


def test_credentials_are_given_as_boto3_takes_them_and_never_shown() -> None:
    aws = parse_aws(
        {
            "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
            "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-secret",
            "AWS_SESSION_TOKEN": "FwoGZXIvYXdzE-token",
            "AWS_PROFILE": "dev",
        }
    )
    assert aws.credentials() == {
        "aws_access_key_id": "AKIDEXAMPLE",
        "aws_secret_access_key": "wJalrXUtnFEMI-secret",
        "aws_session_token": "FwoGZXIvYXdzE-token",
    }
    assert aws.profile == "dev"
    shown = repr(aws)
    for value in ("AKIDEXAMPLE", "wJalrXUtnFEMI-secret", "FwoGZXIvYXdzE-token"):
        assert value not in shown
    assert "dev" in shown
