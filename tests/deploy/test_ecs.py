"""The ECS task definition: devices per chip, IPC_LOCK, placement, health check, roles, log group and its
region; the plan's refusals; the service and ALB target group; all checked against botocore's ECS and
ELBv2 models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from service_model import check

from neuronserve.deploy.ecs import service_request, target_group_request, task_definition
from neuronserve.deploy.validate import ECS, plan_check
from neuronserve.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
MODEL = {"HF_MODEL_ID": "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "SM_VLLM_MAX_MODEL_LEN": "2048"}
TINY_ENV = str(ROOT / "sagemaker" / "envs" / "inf2-xlarge-tinyllama.env")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any AWS region or profile setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_CONFIG_FILE"] = "/nonexistent/aws-config"  # no profile region either
    return {**env, **extra}


def render(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "ecs" / "render.py"), *args],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
        env=env if env is not None else clean_env(AWS_REGION="us-east-1"),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("instance", "chips"), [("inf2.xlarge", 1), ("inf2.48xlarge", 12), ("trn1.32xlarge", 16)]
)
def test_maps_one_device_per_chip(instance: str, chips: int) -> None:
    doc = task_definition("img", instance, {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}, region="us-east-1")
    container = doc["containerDefinitions"][0]
    devices = container["linuxParameters"]["devices"]
    assert [d["hostPath"] for d in devices] == [f"/dev/neuron{i}" for i in range(chips)]
    assert all(d["hostPath"] == d["containerPath"] for d in devices)
    assert container["linuxParameters"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert doc["placementConstraints"] == [
        {"type": "memberOf", "expression": f"attribute:ecs.instance-type == {instance}"}
    ]
    assert "/live" in " ".join(container["healthCheck"]["command"])
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert env == {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "NEURONSERVE_DEVICE": "neuron"}
    assert container["portMappings"][0]["containerPort"] == 8080
    check("ecs", "RegisterTaskDefinition", doc)


def test_unknown_instance_type() -> None:
    with pytest.raises(ConfigError, match=r"inf2\.xlarge"):
        task_definition("img", "g5.xlarge", {}, region="us-east-1")
    named = task_definition("img", "ml.inf2.xlarge", {}, region="us-east-1")  # SageMaker's spelling too
    assert named["placementConstraints"][0]["expression"] == "attribute:ecs.instance-type == inf2.xlarge"


def test_roles_and_log_group() -> None:
    plain = task_definition("img", "inf2.xlarge", MODEL, region="eu-west-1")
    assert "executionRoleArn" not in plain and "taskRoleArn" not in plain
    options = plain["containerDefinitions"][0]["logConfiguration"]["options"]
    assert "awslogs-create-group" not in options, "needs logs:CreateLogGroup, absent from the instance role"
    assert options["awslogs-region"] == "eu-west-1"
    roles = task_definition(
        "img",
        "inf2.xlarge",
        MODEL,
        execution_role_arn="arn:aws:iam::123456789012:role/ecsTaskExecutionRole",
        task_role_arn="arn:aws:iam::123456789012:role/neuronserve-task",
        create_log_group=True,
        region="us-east-1",
    )
    assert roles["executionRoleArn"].endswith("/ecsTaskExecutionRole")
    assert roles["taskRoleArn"].endswith("/neuronserve-task")
    assert roles["containerDefinitions"][0]["logConfiguration"]["options"]["awslogs-create-group"] == "true"
    check("ecs", "RegisterTaskDefinition", roles)


@pytest.mark.parametrize(
    ("env", "instance", "needle"),
    [
        ({}, "inf2.xlarge", "no model configured"),
        ({**MODEL, "SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}, "inf2.xlarge", "has 2 NeuronCores"),
        ({**MODEL, "SM_VLLM_MAX_NUM_SEQS": "zero"}, "inf2.xlarge", "SM_VLLM_MAX_NUM_SEQS"),
    ],
)
def test_the_plans_refusals_are_the_renderers(env: dict[str, str], instance: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        plan_check(env, instance, ECS)
    result = render("--image", "img", "--instance-type", instance, *flags(env))
    assert result.returncode == 2 and result.stdout == ""
    assert needle in result.stderr and "Traceback" not in result.stderr


def test_the_plan_sees_every_core_of_the_instance() -> None:
    assert (
        plan_check({**MODEL, "SM_VLLM_TENSOR_PARALLEL_SIZE": "24"}, "inf2.48xlarge", ECS).visible_cores == 24
    )
    with pytest.raises(ConfigError, match="has 24 NeuronCores"):
        plan_check({**MODEL, "SM_VLLM_TENSOR_PARALLEL_SIZE": "32"}, "inf2.48xlarge", ECS)


def test_service_behind_an_alb_checks_ping() -> None:
    group = target_group_request("vpc-123")
    assert (group["HealthCheckPath"], group["Port"], group["Matcher"]) == ("/ping", 8080, {"HttpCode": "200"})
    check("elbv2", "CreateTargetGroup", group)
    arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/neuronserve/0123456789abcdef"
    service = service_request("neuron", arn)
    assert service["loadBalancers"] == [
        {"targetGroupArn": arn, "containerName": "neuronserve", "containerPort": 8080}
    ]
    assert service["healthCheckGracePeriodSeconds"] >= 300
    check("ecs", "CreateService", service)


def test_the_container_check_is_live_and_the_load_balancer_checks_ping() -> None:
    """ECS's container health check allows a start period of at most 300 s, and a first start compiles
    for longer: on /ping (503 until loaded) ECS replaced the task mid-compile. /live answers 200 while the
    server makes progress; /ping stays the target group's readiness check. Rendered as a user runs it."""
    model = "HF_MODEL_ID=TinyLlama/TinyLlama-1.1B-Chat-v1.0"
    task = render("--image", "img", "--instance-type", "inf2.xlarge", "--env-file", TINY_ENV, "--env", model)
    assert task.returncode == 0, task.stderr
    check_cmd = " ".join(json.loads(task.stdout)["containerDefinitions"][0]["healthCheck"]["command"])
    assert "http://127.0.0.1:8080/live" in check_cmd and "/ping" not in check_cmd
    group = render("--what", "target-group", "--vpc-id", "vpc-123")
    assert group.returncode == 0 and json.loads(group.stdout)["HealthCheckPath"] == "/ping"


def test_the_work_volume_is_mounted_where_the_container_works() -> None:
    """The image's work directory, or NEURONSERVE_WORK_DIR where the environment moves it."""
    for env, where in (
        ({}, "/var/lib/neuronserve"),
        ({"NEURONSERVE_WORK_DIR": "/scratch/ns"}, "/scratch/ns"),
    ):
        doc = task_definition("img", "inf2.xlarge", env, region="us-east-1")
        assert doc["containerDefinitions"][0]["mountPoints"] == [
            {"sourceVolume": "work", "containerPath": where}
        ]


def test_checked_in_samples_are_what_render_prints() -> None:
    samples = {
        "task-definition.inf2-xlarge.json": [
            "--image", "IMAGE_URI", "--instance-type", "inf2.xlarge", "--env-file", TINY_ENV,
            "--env", "HF_MODEL_ID=TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        ],
        "target-group.json": ["--what", "target-group", "--vpc-id", "VPC_ID"],
        "service.json": [
            "--what", "service", "--cluster", "neuron", "--target-group-arn", "TARGET_GROUP_ARN",
        ],
    }  # fmt: skip
    for name, args in samples.items():
        out = render(*args)
        assert out.returncode == 0, out.stderr
        sample = ROOT / "ecs" / name
        assert json.loads(out.stdout) == json.loads(sample.read_text()), f"re-run ecs/render.py for {name}"


@pytest.mark.parametrize(
    ("variables", "region"),
    [
        ({"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-west-2"}, "eu-west-1"),
        ({"AWS_DEFAULT_REGION": "us-west-2"}, "us-west-2"),
    ],
)
def test_the_log_region_is_the_aws_clis(variables: dict[str, str], region: str) -> None:
    """AWS_REGION over AWS_DEFAULT_REGION, as the AWS CLI; --region over both."""
    args = ["--image", "img", "--instance-type", "inf2.xlarge", *flags(MODEL)]
    result = render(*args, env=clean_env(**variables))
    assert result.returncode == 0, result.stderr
    options = json.loads(result.stdout)["containerDefinitions"][0]["logConfiguration"]["options"]
    assert options["awslogs-region"] == region
    assert f"--region {region}" in result.stderr
    flagged = render(*args, "--region", "ap-south-1", env=clean_env(**variables))
    assert (
        json.loads(flagged.stdout)["containerDefinitions"][0]["logConfiguration"]["options"]["awslogs-region"]
        == "ap-south-1"
    )


def test_the_log_region_comes_from_the_profile(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("[default]\nregion = ca-central-1\n[profile other]\nregion = sa-east-1\n")
    args = ["--image", "img", "--instance-type", "inf2.xlarge", *flags(MODEL)]
    for extra, region in (([], "ca-central-1"), (["--profile", "other"], "sa-east-1")):
        result = render(*args, *extra, env={**clean_env(), "AWS_CONFIG_FILE": str(config)})
        assert result.returncode == 0, result.stderr
        assert f'"awslogs-region": "{region}"' in result.stdout


def test_no_region_anywhere_is_refused_not_defaulted() -> None:
    result = render("--image", "img", "--instance-type", "inf2.xlarge", *flags(MODEL), env=clean_env())
    assert result.returncode == 2 and result.stdout == ""
    assert "no AWS region" in result.stderr and "AWS_REGION" in result.stderr
    assert "Traceback" not in result.stderr
    typo = render("--image", "img", "--instance-type", "inf2.xlarge", *flags(MODEL), "--region", "us-east1")
    assert typo.returncode == 2 and "not an AWS region" in typo.stderr


def flags(env: dict[str, str]) -> list[str]:
    return [a for k, v in env.items() for a in ("--env", f"{k}={v}")]
