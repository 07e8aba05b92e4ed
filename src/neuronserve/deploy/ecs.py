"""An ECS task definition for the image on a Neuron container instance (EC2 launch type).

The container needs every /dev/neuronN of the instance (one per chip) mapped, IPC_LOCK for the Neuron
runtime's pinned memory, a placement constraint so it lands on a Neuron instance, and the same health
check SageMaker uses (/ping), with a start period long enough for a first compile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from neuronserve.errors import ConfigError

CHIPS = {
    "inf2.xlarge": 1,
    "inf2.8xlarge": 1,
    "inf2.24xlarge": 6,
    "inf2.48xlarge": 12,
    "trn1.2xlarge": 1,
    "trn1.32xlarge": 16,
    "trn1n.32xlarge": 16,
    "trn2.48xlarge": 16,
}
# Memory left to the host agent and OS, by instance (MiB of the instance's total).
MEMORY_MIB = {
    "inf2.xlarge": 14336,
    "inf2.8xlarge": 118784,
    "inf2.24xlarge": 360448,
    "inf2.48xlarge": 737280,
    "trn1.2xlarge": 28672,
    "trn1.32xlarge": 475136,
    "trn1n.32xlarge": 475136,
    "trn2.48xlarge": 1900544,
}


def task_definition(
    image: str,
    instance_type: str,
    env: Mapping[str, str],
    *,
    family: str = "neuronserve",
    cache_volume: str = "/var/lib/neuronserve",
    log_group: str = "/ecs/neuronserve",
    region: str = "us-east-1",
) -> dict[str, Any]:
    if instance_type not in CHIPS:
        raise ConfigError(f"--instance-type {instance_type}: expected one of {', '.join(sorted(CHIPS))}")
    devices = [
        {"hostPath": f"/dev/neuron{i}", "containerPath": f"/dev/neuron{i}", "permissions": ["read", "write"]}
        for i in range(CHIPS[instance_type])
    ]
    environment = [
        {"name": k, "value": v} for k, v in sorted({**env, "NEURONSERVE_DEVICE": "neuron"}.items())
    ]
    return {
        "family": family,
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
                "linuxParameters": {
                    "devices": devices,
                    "capabilities": {"add": ["IPC_LOCK"]},
                    "sharedMemorySize": 4096,
                },
                "ulimits": [{"name": "memlock", "softLimit": -1, "hardLimit": -1}],
                "mountPoints": [{"sourceVolume": "work", "containerPath": "/var/lib/neuronserve"}],
                "healthCheck": {
                    "command": [
                        "CMD",
                        "python3",
                        "-c",
                        "import urllib.request as u; u.urlopen('http://127.0.0.1:8080/ping', timeout=4)",
                    ],
                    "interval": 30,
                    "timeout": 5,
                    "retries": 3,
                    "startPeriod": 300,
                },
                "stopTimeout": 30,
                "logConfiguration": {
                    "logDriver": "awslogs",
                    "options": {
                        "awslogs-group": log_group,
                        "awslogs-region": region,
                        "awslogs-stream-prefix": "neuronserve",
                        "awslogs-create-group": "true",
                    },
                },
            }
        ],
    }
