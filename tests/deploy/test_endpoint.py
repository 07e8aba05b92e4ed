"""The endpoint's life (deploy/endpoint.py, with rollout.py and asyncinvoke.py on top) through the real
CLI against a moto server on 127.0.0.1: delete then redeploy at once, a failed deploy, describe,
blue/green update, async deploy and invoke, tags/VPC/KMS.

moto 5.2.5 lacks UpdateEndpoint and the Deleting state; `deploy_support.Lifecycle` adds them as the
SageMaker API reference describes them. What each created is read back with plain boto3.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deploy_support import Lifecycle, patch_lifecycle, patch_moto, use_moto

pytest.importorskip("sagemaker.core.resources", reason="needs the deploy extra (sagemaker-core)")
pytestmark = pytest.mark.s3

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/neuronserve:0.1.0-neuron-sdk2.27.1"
ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"
ENV_FILE = str(ROOT / "sagemaker" / "envs" / "inf2-xlarge-tinyllama.env")


@pytest.fixture
def life(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> Lifecycle:
    import httpx

    patch_moto(monkeypatch)
    lifecycle = Lifecycle()
    patch_lifecycle(monkeypatch, lifecycle)
    httpx.post(f"{moto_url}/moto-api/reset", timeout=10).raise_for_status()
    use_moto(monkeypatch, moto_url)
    return lifecycle


def run(action: str, *args: str) -> int:
    from neuronserve.deploy.cli import main

    return main(action, ["--region", "us-east-1", "--poll-seconds", "0.01", *args])


def deploy(name: str, *extra: str) -> int:
    return run(
        "deploy", "--name", name, "--image", IMAGE, "--role", ROLE, "--instance-type", "ml.inf2.xlarge",
        "--model-data", "s3://models/tinyllama/", "--env-file", ENV_FILE, *extra,
    )  # fmt: skip


def sm():  # type: ignore[no-untyped-def]
    import boto3

    return boto3.client("sagemaker", region_name="us-east-1")


def test_delete_waits_until_gone_so_a_redeploy_does_not_collide(
    life: Lifecycle, capsys: pytest.CaptureFixture[str]
) -> None:
    assert deploy("ns-again") == 0
    assert run("delete", "--name", "ns-again") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "deleted: endpoint, endpoint-config, model"
    assert "ns-again" not in life.countdown, "delete returned while the endpoint was still Deleting"
    assert deploy("ns-again", "--wait") == 0, capsys.readouterr().err
    assert sm().describe_endpoint(EndpointName="ns-again")["EndpointStatus"] == "InService"


def test_delete_reports_an_error_that_is_not_not_found(
    life: Lifecycle, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from moto.sagemaker import models
    from moto.sagemaker.exceptions import ValidationError

    def refuse(self: object, endpoint_name: str) -> None:
        raise ValidationError(message="1 validation error detected: Value 'x' at 'endpointName' failed")

    monkeypatch.setattr(models.SageMakerModelBackend, "describe_endpoint", refuse)
    assert run("delete", "--name", "ns-x") == 1
    err = capsys.readouterr().err
    assert "ValidationException: 1 validation error" in err and "Traceback" not in err


def test_failed_deploy_prints_the_failure_reason(life: Lifecycle, capsys: pytest.CaptureFixture[str]) -> None:
    life.fail_next = (
        "The primary container for production variant AllTraffic did not pass the ping health check."
    )
    assert deploy("ns-bad", "--wait") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("deploy: error: endpoint ns-bad is Failed: The primary container")
    assert run("describe", "--name", "ns-bad") == 0
    described = json.loads(capsys.readouterr().out)
    assert described["FailureReason"] == life.fail_next or described["FailureReason"].startswith(
        "The primary"
    )
    assert described["ProductionVariants"][0]["InstanceType"] == "ml.inf2.xlarge"
    assert described["ProductionVariants"][0]["ModelName"] == "ns-bad-model"


def test_update_rolls_a_new_config_blue_green(life: Lifecycle, capsys: pytest.CaptureFixture[str]) -> None:
    assert deploy("ns-up") == 0
    capsys.readouterr()
    common = [
        "--name", "ns-up", "--image", IMAGE, "--role", ROLE, "--instance-type", "ml.inf2.xlarge",
        "--model-data", "s3://models/tinyllama-v2/", "--env-file", ENV_FILE,
    ]  # fmt: skip
    assert run("update", *common, "--alarm", "ns-up-5xx", "--wait") == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    new_config = result["EndpointConfigName"]
    assert result["Changed"] and result["Previous"] == "ns-up-config"
    assert new_config.startswith("ns-up-config-") and new_config != "ns-up-config"
    endpoint = sm().describe_endpoint(EndpointName="ns-up")
    assert endpoint["EndpointStatus"] == "InService" and endpoint["EndpointConfigName"] == new_config
    policy = life.updates[-1]["DeploymentConfig"]
    assert policy["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["Type"] == "ALL_AT_ONCE"
    assert policy["AutoRollbackConfiguration"] == {"Alarms": [{"AlarmName": "ns-up-5xx"}]}
    config = sm().describe_endpoint_config(EndpointConfigName=new_config)
    model = sm().describe_model(ModelName=config["ProductionVariants"][0]["ModelName"])
    assert (
        model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"] == "s3://models/tinyllama-v2/"
    )
    configs = [c["EndpointConfigName"] for c in sm().list_endpoint_configs()["EndpointConfigs"]]
    assert configs == [new_config], "the previous config is deleted once the new one is InService"
    assert [m["ModelName"] for m in sm().list_models()["Models"]] == [model["ModelName"]]

    # The same spec again: same hash, nothing to roll.
    assert run("update", *common) == 0
    assert json.loads(capsys.readouterr().out)["Changed"] is False
    assert len(life.updates) == 1
    # delete finds the hashed names through the endpoint.
    assert run("delete", "--name", "ns-up") == 0
    assert sm().list_endpoint_configs()["EndpointConfigs"] == [] and sm().list_models()["Models"] == []


def test_async_deploy_and_invoke(life: Lifecycle, moto_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    import boto3
    import httpx

    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="async")
    assert deploy("ns-async", "--async-output", "s3://async/out/", "--async-max-concurrent", "4") == 0
    config = sm().describe_endpoint_config(EndpointConfigName="ns-async-config")
    assert config["AsyncInferenceConfig"] == {
        "OutputConfig": {"S3OutputPath": "s3://async/out/"},
        "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 4},
    }
    answer = [{"generated_text": "a long story"}]
    httpx.post(
        f"{moto_url}/moto-api/static/sagemaker/async-endpoint-results",
        json={"results": [{"data": json.dumps(answer)}]},
        timeout=10,
    ).raise_for_status()
    capsys.readouterr()
    assert run("invoke", "--name", "ns-async", "--prompt", "tell me", "--async-input", "s3://async/in/") == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == answer
    locations = json.loads(err.strip().splitlines()[-1])
    bucket, key = locations["InputLocation"][5:].split("/", 1)
    sent = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert sent == {"inputs": "tell me", "parameters": {"max_new_tokens": 64}}


def test_tags_vpc_and_kms_reach_the_resources(life: Lifecycle) -> None:
    extra = ["--tag", "team=ml", "--tag", "cost=42", "--subnet", "subnet-1", "--security-group", "sg-1"]
    assert deploy("ns-opt", *extra, "--kms-key", "alias/ns") == 0
    model = sm().describe_model(ModelName="ns-opt-model")
    assert model["VpcConfig"] == {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]}
    config = sm().describe_endpoint_config(EndpointConfigName="ns-opt-config")
    assert config["KmsKeyId"] == "alias/ns"
    tags = sm().list_tags(ResourceArn=config["EndpointConfigArn"])["Tags"]
    assert sorted((t["Key"], t["Value"]) for t in tags) == [("cost", "42"), ("team", "ml")]
