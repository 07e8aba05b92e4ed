"""deploy -> describe -> invoke -> autoscale -> delete through the real CLI, offline against a moto server.

The resources are created by sagemaker-core over real HTTP to moto on 127.0.0.1; what they created is read
back with plain boto3 and compared with the literal requests SageMaker should receive.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deploy_support import RecordingMotoServer, patch_moto, use_moto

pytest.importorskip("sagemaker.core.resources", reason="needs the deploy extra (sagemaker-core)")
pytestmark = pytest.mark.s3

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/neuronserve:0.1.0-neuron-sdk2.27.1"
ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"


@pytest.fixture
def aws(moto_url: str, moto_server: RecordingMotoServer, monkeypatch: pytest.MonkeyPatch) -> str:
    import httpx

    patch_moto(monkeypatch)
    moto_server.requests.clear()
    httpx.post(f"{moto_url}/moto-api/reset", timeout=10).raise_for_status()
    use_moto(monkeypatch, moto_url)
    return moto_url


def run(action: str, *args: str) -> int:
    from neuronserve.deploy.cli import main

    return main(action, ["--region", "us-east-1", *args])


def test_full_flow(aws: str, moto_server: RecordingMotoServer, capsys: pytest.CaptureFixture[str]) -> None:
    import boto3
    import httpx

    env_file = ROOT / "sagemaker" / "envs" / "inf2-xlarge-tinyllama.env"
    code = run(
        "deploy",
        "--name", "ns-tiny",
        "--image", IMAGE,
        "--role", ROLE,
        "--instance-type", "ml.inf2.xlarge",
        "--model-data", "s3://models/tinyllama/",
        "--env-file", str(env_file),
        "--env", "SM_VLLM_MAX_NUM_SEQS=2",
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == "ns-tiny"

    sm = boto3.client("sagemaker", region_name="us-east-1")
    model = sm.describe_model(ModelName="ns-tiny-model")
    assert model["ExecutionRoleArn"] == ROLE
    container = model["PrimaryContainer"]
    assert container["Image"] == IMAGE
    assert container["ModelDataSource"] == {
        "S3DataSource": {
            "S3Uri": "s3://models/tinyllama/",
            "S3DataType": "S3Prefix",
            "CompressionType": "None",
        }
    }
    assert container["Environment"] == {
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
        "SM_VLLM_MAX_MODEL_LEN": "2048",
        "SM_VLLM_MAX_NUM_SEQS": "2",
        "SM_VLLM_DTYPE": "bfloat16",
        "SM_VLLM_ENABLE_PREFIX_CACHING": "false",
        "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[256,512,1024,2048]",
        "SM_NEURON_TOKEN_GENERATION_BUCKETS": "[256,512,1024,2048]",
        "SM_NEURON_SAVE_SHARDED_CHECKPOINT": "true",
    }

    config = sm.describe_endpoint_config(EndpointConfigName="ns-tiny-config")
    assert config["ProductionVariants"] == [
        {
            "VariantName": "AllTraffic",
            "ModelName": "ns-tiny-model",
            "InitialInstanceCount": 1,
            "InstanceType": "ml.inf2.xlarge",
            "VolumeSizeInGB": 100,
            "ModelDataDownloadTimeoutInSeconds": 3600,
            "ContainerStartupHealthCheckTimeoutInSeconds": 3600,
            "InferenceAmiVersion": "al2-ami-sagemaker-inference-neuron-2",
        }
    ]
    endpoint = sm.describe_endpoint(EndpointName="ns-tiny")
    assert endpoint["EndpointConfigName"] == "ns-tiny-config"

    assert run("describe", "--name", "ns-tiny") == 0
    described = json.loads(capsys.readouterr().out)
    assert described["EndpointName"] == "ns-tiny"
    assert described["EndpointConfigName"] == "ns-tiny-config"

    answer = [{"generated_text": "Paris."}]
    httpx.post(
        f"{aws}/moto-api/static/sagemaker/endpoint-results",
        json={"results": [{"Body": json.dumps(answer), "ContentType": "application/json"}]},
        timeout=10,
    ).raise_for_status()
    assert run("invoke", "--name", "ns-tiny", "--prompt", "capital of France?") == 0
    assert json.loads(capsys.readouterr().out) == answer
    # what reached the endpoint (moto answers the canned result whatever it is sent)
    [sent] = moto_server.sent("POST", "/endpoints/ns-tiny/invocations")
    assert json.loads(sent.body) == {"inputs": "capital of France?", "parameters": {"max_new_tokens": 64}}
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["accept"] == "application/json"

    assert run("autoscale", "--name", "ns-tiny", "--min", "1", "--max", "3", "--target", "20") == 0
    capsys.readouterr()
    scaling = boto3.client("application-autoscaling", region_name="us-east-1")
    policies = scaling.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    assert [p["ResourceId"] for p in policies] == ["endpoint/ns-tiny/variant/AllTraffic"]
    tracking = policies[0]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["TargetValue"] == 20.0
    assert (
        tracking["PredefinedMetricSpecification"]["PredefinedMetricType"]
        == "SageMakerVariantInvocationsPerInstance"
    )

    assert run("delete", "--name", "ns-tiny") == 0
    assert capsys.readouterr().out.strip() == "deleted: endpoint, endpoint-config, model"
    assert sm.list_endpoints()["Endpoints"] == []
    assert sm.list_models()["Models"] == []
    assert run("delete", "--name", "ns-tiny") == 0
    assert "nothing" in capsys.readouterr().out


def test_deploy_refuses_tp_over_the_instance_before_any_call(
    aws: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import boto3

    code = run(
        "deploy",
        "--name", "ns-big",
        "--image", IMAGE,
        "--role", ROLE,
        "--instance-type", "ml.inf2.48xlarge",
        "--model-data", "s3://models/llama/",
        "--env", "SM_VLLM_TENSOR_PARALLEL_SIZE=32", "--env", "SM_VLLM_MAX_MODEL_LEN=2048",
    )  # fmt: skip
    assert code == 2
    assert "has 24 NeuronCores" in capsys.readouterr().err
    assert boto3.client("sagemaker", region_name="us-east-1").list_models()["Models"] == []


def test_patches_do_not_outlive_their_test() -> None:
    from moto.sagemaker import models

    config = object.__new__(models.FakeEndpointConfig)
    with pytest.raises(Exception, match="instanceType"):
        config.validate_instance_type("ml.inf2.xlarge")


def test_token_by_secret_arn_end_to_end(aws: str, capsys: pytest.CaptureFixture[str]) -> None:
    """deploy --hf-token-secret-arn: the model's Environment (read back from moto) holds the ARN and no
    token; the container's start path resolves that Environment into HF_TOKEN from the same moto."""
    import boto3

    from neuronserve.host.secrets import with_secrets

    token = "hf_moto_end_to_end_token_0123456789"
    secrets = boto3.client("secretsmanager", region_name="us-east-1", endpoint_url=aws)
    arn = secrets.create_secret(Name="ns-hf-token", SecretString=token)["ARN"]
    code = run(
        "deploy", "--name", "ns-secret", "--image", IMAGE, "--role", ROLE,
        "--instance-type", "ml.inf2.xlarge", "--model-data", "s3://models/tinyllama/",
        "--env", "SM_VLLM_TENSOR_PARALLEL_SIZE=2", "--env", "SM_VLLM_MAX_MODEL_LEN=2048",
        "--hf-token-secret-arn", arn,
    )  # fmt: skip
    streams = capsys.readouterr()
    assert code == 0, streams.err
    assert token not in streams.out + streams.err and "plain text" not in streams.err
    sm = boto3.client("sagemaker", region_name="us-east-1", endpoint_url=aws)
    env = sm.describe_model(ModelName="ns-secret-model")["PrimaryContainer"]["Environment"]
    assert env["HF_TOKEN_SECRET_ARN"] == arn and "HF_TOKEN" not in env
    assert token not in json.dumps(env)
    container = {**env, "AWS_ENDPOINT_URL_SECRETS_MANAGER": aws, "AWS_ACCESS_KEY_ID": "testing",
                 "AWS_SECRET_ACCESS_KEY": "testing"}  # fmt: skip
    assert with_secrets(container)["HF_TOKEN"] == token
