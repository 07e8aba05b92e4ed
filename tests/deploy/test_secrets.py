"""Secrets at deploy: the tools run for real (subprocess) with tokens set, and no token reaches their
stdout or stderr; ECS takes secrets as `secrets` entries (valueFrom an ARN), never in `environment`;
SageMaker gets the token's ARN (HF_TOKEN_SECRET_ARN), and a token in clear draws a warning. Requests are
checked against botocore's service models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from service_model import check

from neuronserve.deploy.ecs import task_definition
from neuronserve.deploy.secrets import mask_doc, masked_json
from neuronserve.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "hf_deploytesttoken0123456789abcdef"
API_KEY = "sk-apikeyvalue-9876543210"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SM_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-token-AbCdEf"
SSM_ARN = "arn:aws:ssm:us-east-1:123456789012:parameter/neuronserve/api-key"
MODEL = ["--env", "HF_MODEL_ID=TinyLlama/TinyLlama-1.1B-Chat-v1.0", "--env", "SM_VLLM_MAX_MODEL_LEN=2048"]
SECRETS = [
    "--env", f"HF_TOKEN={TOKEN}", "--env", f"SM_VLLM_API_KEY={API_KEY}",
    "--env", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", "--env", "DB_PASSWORD_FILE=hunter2hunter2",
]  # fmt: skip
VALUES = (TOKEN, API_KEY, AWS_SECRET, "hunter2hunter2")


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AWS_REGION": "us-east-1"}  # the ECS log group's region
    return subprocess.run(
        [sys.executable, str(ROOT / script), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env=env,
    )


def sagemaker(action: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run(
        f"sagemaker/{action}.py", "--dry-run", "--name", "ns", "--image", "IMAGE",
        "--role", "arn:aws:iam::123456789012:role/sm", "--instance-type", "ml.inf2.xlarge",
        "--env", "SM_VLLM_TENSOR_PARALLEL_SIZE=2", "--env", "HF_MODEL_ID=org/model",
        "--env", "SM_VLLM_MAX_MODEL_LEN=2048", *extra,
    )  # fmt: skip


def assert_no_secret(result: subprocess.CompletedProcess[str]) -> None:
    for value in VALUES:
        assert value not in result.stdout and value not in result.stderr, value


@pytest.mark.parametrize("action", ["deploy", "update"])
def test_dry_runs_mask_every_secret_value(action: str) -> None:
    result = sagemaker(action, *SECRETS)
    assert result.returncode == 0, result.stderr
    assert_no_secret(result)
    if action == "deploy":
        env = json.loads(result.stdout)["model"]["PrimaryContainer"]["Environment"]
        assert env["HF_TOKEN"] == env["SM_VLLM_API_KEY"] == env["AWS_SECRET_ACCESS_KEY"] == "***"
        assert env["DB_PASSWORD_FILE"] == "***"
        assert env["HF_MODEL_ID"] == "org/model"  # settings stay readable
    warning = next(line for line in result.stderr.splitlines() if ": warning:" in line)
    assert "HF_TOKEN" in warning and "plain text" in warning and "--hf-token-secret-arn" in warning


def test_an_env_file_line_is_never_echoed(tmp_path: Path) -> None:
    env_file = tmp_path / "x.env"
    env_file.write_text(f"HF_MODEL_ID=org/model\n{TOKEN}\n")
    result = sagemaker("deploy", "--env-file", str(env_file))
    assert result.returncode == 2 and f"{env_file}:2: expected KEY=VALUE" in result.stderr
    assert_no_secret(result)


def test_the_token_arn_goes_to_the_environment_and_no_token_does() -> None:
    result = sagemaker("deploy", "--hf-token-secret-arn", SM_ARN)
    assert result.returncode == 0, result.stderr
    model = json.loads(result.stdout)["model"]
    env = model["PrimaryContainer"]["Environment"]
    assert env["HF_TOKEN_SECRET_ARN"] == SM_ARN  # a reference, shown as is
    assert "HF_TOKEN" not in env and "plain text" not in result.stderr
    check("sagemaker", "CreateModel", model)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--hf-token-secret-arn", SM_ARN, "--env", f"HF_TOKEN={TOKEN}"], "drop HF_TOKEN"),
        (["--hf-token-secret-arn", TOKEN], "value not shown"),
        (["--hf-token-secret-arn", SSM_ARN], "not a Secrets Manager secret ARN"),
        (
            ["--hf-token-secret-arn", SM_ARN, "--network-isolation", "--model-data", "s3://b/m/"],
            "cannot reach Secrets Manager",
        ),
    ],
)
def test_token_arn_refusals(extra: list[str], needle: str) -> None:
    result = sagemaker("deploy", *extra)
    assert result.returncode == 2 and needle in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert_no_secret(result)


def test_ecs_refuses_a_clear_secret_and_says_how_to_pass_an_arn() -> None:
    result = run("ecs/render.py", "--image", "img", "--instance-type", "inf2.xlarge", *MODEL, *SECRETS)
    assert result.returncode == 2 and result.stdout == ""
    assert "--secret HF_TOKEN=arn:aws:secretsmanager:" in result.stderr
    assert "AWS_SECRET_ACCESS_KEY, DB_PASSWORD_FILE, HF_TOKEN, SM_VLLM_API_KEY" in result.stderr
    assert "Traceback" not in result.stderr
    assert_no_secret(result)


def test_ecs_takes_secrets_as_value_from_arns() -> None:
    result = run(
        "ecs/render.py", "--image", "img", "--instance-type", "inf2.xlarge", *MODEL,
        "--secret", f"HF_TOKEN={SM_ARN}", "--secret", f"SM_VLLM_API_KEY={SSM_ARN}",
        "--secret", f"OTHER_TOKEN={SM_ARN}:token::",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    container = doc["containerDefinitions"][0]
    assert container["secrets"] == [
        {"name": "HF_TOKEN", "valueFrom": SM_ARN},
        {"name": "OTHER_TOKEN", "valueFrom": f"{SM_ARN}:token::"},
        {"name": "SM_VLLM_API_KEY", "valueFrom": SSM_ARN},
    ]
    names = {e["name"] for e in container["environment"]}
    assert not names & {"HF_TOKEN", "OTHER_TOKEN", "SM_VLLM_API_KEY"}
    check("ecs", "RegisterTaskDefinition", doc)


@pytest.mark.parametrize(
    ("secret", "needle"),
    [
        (f"HF_TOKEN={TOKEN}", "not the secret itself"),
        (TOKEN, "expected NAME=ARN"),
        ("HF_TOKEN=arn:aws:s3:::bucket/key", "Secrets Manager secret ARN"),
    ],
)
def test_ecs_secret_flag_takes_only_arns(secret: str, needle: str) -> None:
    result = run(
        "ecs/render.py", "--image", "img", "--instance-type", "inf2.xlarge", *MODEL, "--secret", secret
    )
    assert result.returncode == 2 and needle in result.stderr, result.stderr
    assert_no_secret(result)


def test_ecs_name_both_in_env_and_secret_is_refused() -> None:
    with pytest.raises(ConfigError, match="both as --env and as --secret"):
        task_definition(
            "img", "inf2.xlarge", {"HF_TOKEN": ""}, secrets={"HF_TOKEN": SM_ARN}, region="us-east-1"
        )


def test_masking_is_one_rule_for_both_shapes() -> None:
    doc = {
        "PrimaryContainer": {"Environment": {"HF_TOKEN": TOKEN, "HF_TOKEN_SECRET_ARN": SM_ARN, "N": "1"}},
        "containerDefinitions": [
            {"environment": [{"name": "MY_SECRET", "value": "v4lue!"}, {"name": "N", "value": "1"}]}
        ],
        "note": f"echo {TOKEN}",
    }
    masked = mask_doc(doc)
    assert masked["PrimaryContainer"]["Environment"] == {
        "HF_TOKEN": "***",
        "HF_TOKEN_SECRET_ARN": SM_ARN,
        "N": "1",
    }
    assert masked["containerDefinitions"][0]["environment"][0]["value"] == "***"
    assert TOKEN not in masked_json(doc, {"HF_TOKEN": TOKEN})  # scrubbed wherever else it appears
    assert doc["PrimaryContainer"]["Environment"]["HF_TOKEN"] == TOKEN  # the input is not changed
