"""An ECS task definition for the image on a Neuron container instance (EC2 launch type).

The container needs every /dev/neuronN of the instance (one per chip) mapped, IPC_LOCK for the Neuron
runtime's pinned memory, a placement constraint so it lands on a Neuron instance, and a container health
check on /live. Not /ping: /ping answers 503 until the model is loaded, and a first start compiles
for longer than the 300 s most `startPeriod` ECS allows (RegisterTaskDefinition's HealthCheck), so ECS
would replace the task mid-compile; /live answers 200 in every phase while the server makes progress
(staging, compiling, loading: front/probes.py) and 503 when it is stuck. /ping stays the load
balancer's readiness check (the target group's HealthCheckPath), so no request reaches a task that is
not ready.

The environment is run through the container's own launch plan first (deploy/validate.py, the check
SageMaker and EKS make too): a task definition the container would refuse at start ("no model configured",
TP over the cores, a bad flag) is refused here instead, before anything is registered. Shapes: botocore
ecs/2014-11-13/service-2.json (`RegisterTaskDefinitionRequest`, `CreateServiceRequest`) and
elbv2/2015-12-01 (`CreateTargetGroupInput`).

IAM: `executionRoleArn` is the role the ECS agent uses to pull from ECR and write the awslogs stream;
`taskRoleArn` is the role the container's own calls use (the S3 model and NEURONSERVE_CACHE_URI).
Secrets (HF_TOKEN, any *_TOKEN / *_KEY / *_SECRET) come as `secrets` entries whose `valueFrom` is an
ARN, fetched by the agent with the execution role (secretsmanager:GetSecretValue / ssm:GetParameters).
Without them both fall back to the container instance role. The log group is created once by the
command the renderer prints (`aws logs create-log-group`), not by `awslogs-create-group`, which would
need `logs:CreateLogGroup` at every task start and is missing from the default instance role
(AmazonEC2ContainerServiceforEC2Role); `--create-log-group` opts back in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from neuronserve.deploy.secrets import refuse_clear_secrets
from neuronserve.deploy.validate import ECS, IMAGE_WORK_DIR, WORK_DIR_VAR, instance_name
from neuronserve.errors import ConfigError
from neuronserve.plan.fit import instances

# Memory left to the host agent and OS, by instance (MiB of the instance's total: the Neuron documentation's
# instance pages, e.g. general/arch/neuron-hardware/inf2-arch.rst, "Host Memory (GiB)").
MEMORY_MIB = {
    "inf2.xlarge": 14336,
    "inf2.8xlarge": 118784,
    "inf2.24xlarge": 360448,
    "inf2.48xlarge": 737280,
    "trn1.2xlarge": 28672,
    "trn1.32xlarge": 475136,
    "trn1n.32xlarge": 475136,
    "trn2.3xlarge": 118784,
    "trn2.48xlarge": 1900544,
    "trn2u.48xlarge": 1900544,
}


def chips(instance_type: str) -> int:
    """Neuron devices (/dev/neuronN) of an instance type, from the one instance table."""
    return instances.INSTANCES[instances.normalize(instance_type)][1]


def task_definition(
    image: str,
    instance_type: str,
    env: Mapping[str, str],
    *,
    family: str = "neuronserve",
    cache_volume: str = "/var/lib/neuronserve",
    log_group: str = "/ecs/neuronserve",
    region: str,
    execution_role_arn: str | None = None,
    task_role_arn: str | None = None,
    create_log_group: bool = False,
    secrets: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """RegisterTaskDefinition's input. `secrets` maps variable names to Secrets Manager / SSM parameter
    ARNs: the ECS agent resolves them at task start (`secrets[].valueFrom`, with the execution role), so
    no secret value is stored in the task definition; a secret value in `env` is refused."""
    instance_type = instance_name(instance_type, ECS)
    work_dir = env.get(WORK_DIR_VAR, "").strip() or IMAGE_WORK_DIR  # where the container works
    secrets = dict(secrets or {})
    refuse_clear_secrets(env, secrets, "the task definition's environment")
    devices = [
        {"hostPath": f"/dev/neuron{i}", "containerPath": f"/dev/neuron{i}", "permissions": ["read", "write"]}
        for i in range(chips(instance_type))
    ]
    environment = [
        {"name": k, "value": v} for k, v in sorted({**env, "NEURONSERVE_DEVICE": "neuron"}.items())
    ]
    log_options = {
        "awslogs-group": log_group,
        "awslogs-region": region,
        "awslogs-stream-prefix": "neuronserve",
    }
    if create_log_group:
        log_options["awslogs-create-group"] = "true"
    roles = {"executionRoleArn": execution_role_arn, "taskRoleArn": task_role_arn}
    return {
        "family": family,
        **{k: v for k, v in roles.items() if v},
        "requiresCompatibilities": ["EC2"],
        "networkMode": "bridge",
        "placementConstraints": [
            {"type": "memberOf", "expression": f"attribute:ecs.instance-type == {instance_type}"}
        ],
        "volumes": [{"name": "work", "host": {"sourcePath": cache_volume}}],
        "containerDefinitions": [
            {
                "name": "neuronserve",
                "image": image,
                "essential": True,
                "command": ["serve"],
                "memoryReservation": MEMORY_MIB[instance_type],
                "portMappings": [{"containerPort": 8080, "hostPort": 8080, "protocol": "tcp"}],
                "environment": environment,
                **_secrets_entry(secrets),
                "linuxParameters": {
                    "devices": devices,
                    "capabilities": {"add": ["IPC_LOCK"]},
                    "sharedMemorySize": 4096,
                },
                "ulimits": [{"name": "memlock", "softLimit": -1, "hardLimit": -1}],
                "mountPoints": [{"sourceVolume": "work", "containerPath": work_dir}],
                "healthCheck": {
                    "command": [
                        "CMD",
                        "python3",
                        "-c",
                        "import urllib.request as u; u.urlopen('http://127.0.0.1:8080/live', timeout=4)",
                    ],
                    "interval": 30,
                    "timeout": 5,
                    "retries": 3,
                    "startPeriod": 300,
                },
                "stopTimeout": 30,
                "logConfiguration": {"logDriver": "awslogs", "options": log_options},
            }
        ],
    }


def _secrets_entry(secrets: Mapping[str, str]) -> dict[str, Any]:
    """ContainerDefinition `secrets` (RegisterTaskDefinition's `Secret`: name, valueFrom), or nothing."""
    if not secrets:
        return {}
    return {"secrets": [{"name": k, "valueFrom": v} for k, v in sorted(secrets.items())]}


def service_request(
    cluster: str,
    target_group_arn: str,
    *,
    family: str = "neuronserve",
    desired_count: int = 1,
    grace_period_s: int = 3600,
) -> dict[str, Any]:
    """CreateService input: the task behind an ALB target group. One task per instance (it maps every
    device and host port 8080). The grace period keeps ECS from replacing a task whose first start is
    still compiling (the container health check's start period stops at 300 s, ECS's maximum)."""
    if desired_count < 1:
        raise ConfigError(f"--desired-count {desired_count}: need at least 1")
    return {
        "cluster": cluster,
        "serviceName": family,
        "taskDefinition": family,
        "desiredCount": desired_count,
        "launchType": "EC2",
        "loadBalancers": [
            {"targetGroupArn": target_group_arn, "containerName": "neuronserve", "containerPort": 8080}
        ],
        "healthCheckGracePeriodSeconds": grace_period_s,
        "placementConstraints": [{"type": "distinctInstance"}],
        "deploymentConfiguration": {"maximumPercent": 100, "minimumHealthyPercent": 0},
    }


def target_group_request(vpc_id: str, name: str = "neuronserve") -> dict[str, Any]:
    """elbv2 CreateTargetGroup input: instance targets on 8080, health checked on GET /ping (200)."""
    return {
        "Name": name,
        "Protocol": "HTTP",
        "Port": 8080,
        "VpcId": vpc_id,
        "TargetType": "instance",
        "HealthCheckProtocol": "HTTP",
        "HealthCheckPath": "/ping",
        "HealthCheckPort": "traffic-port",
        "HealthCheckIntervalSeconds": 30,
        "HealthCheckTimeoutSeconds": 5,
        "HealthyThresholdCount": 2,
        "UnhealthyThresholdCount": 3,
        "Matcher": {"HttpCode": "200"},
    }
