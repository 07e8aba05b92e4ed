"""Print an ECS task definition for a Neuron container instance (or the service and ALB target group
that put it behind a load balancer). Usage:

    python ecs/render.py --image URI --instance-type inf2.xlarge \
        --env-file sagemaker/envs/X.env --env HF_MODEL_ID=org/model > taskdef.json
    python ecs/render.py --what target-group --vpc-id vpc-123 > target-group.json
    python ecs/render.py --what service --cluster neuron --target-group-arn ARN > service.json

The environment is checked by the same launch plan the container runs (the check `sagemaker/deploy.py`
and `neuronserve deploy k8s` make too): what it would refuse at start is refused here (exit 2). The
instance type may be given as `inf2.xlarge` or `ml.inf2.xlarge`; the region as the AWS CLI takes it
(--region, AWS_REGION, AWS_DEFAULT_REGION, the profile's). See docs/DEPLOY.md, "ECS".
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

try:
    from neuronserve.deploy import ecs
    from neuronserve.deploy.envfile import load_env
except ImportError:  # run from a checkout without installing neuronserve
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from neuronserve.deploy import ecs
    from neuronserve.deploy.envfile import load_env
from neuronserve.deploy.cli import MODEL_CONFIG_HELP
from neuronserve.deploy.driver import note
from neuronserve.deploy.region import require_region
from neuronserve.deploy.secrets import masked_json, parse_secret_refs, refuse_clear_secrets
from neuronserve.deploy.validate import ECS, plan_check
from neuronserve.errors import ConfigError, NeuronServeError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ecs/render.py")
    p.add_argument("--what", choices=["task", "service", "target-group"], default="task")
    p.add_argument("--image", help="ECR image URI (task)")
    p.add_argument("--instance-type", help="e.g. inf2.xlarge or ml.inf2.xlarge (task)")
    p.add_argument("--env-file")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME=ARN",
        help="a secret variable (HF_TOKEN, *_TOKEN, *_KEY, *_SECRET) from a Secrets Manager or SSM "
        "parameter ARN: a task definition `secrets` entry; a secret value in --env is refused",
    )
    p.add_argument("--model-config", metavar="PATH", help=MODEL_CONFIG_HELP)
    p.add_argument("--family", default="neuronserve")
    p.add_argument(
        "--region",
        help="region of the log group (task; default: AWS_REGION, AWS_DEFAULT_REGION, then the profile's)",
    )
    p.add_argument("--profile", help="AWS profile whose region is the default (task)")
    p.add_argument("--log-group", default="/ecs/neuronserve")
    p.add_argument("--execution-role-arn", help="role the ECS agent uses: ECR pull, awslogs")
    p.add_argument("--task-role-arn", help="role the container uses: S3 model and compile cache")
    p.add_argument(
        "--create-log-group", action="store_true", help="awslogs-create-group (logs:CreateLogGroup)"
    )
    p.add_argument("--cluster", help="ECS cluster (service)")
    p.add_argument("--target-group-arn", help="ALB target group (service)")
    p.add_argument("--desired-count", type=int, default=1)
    p.add_argument("--vpc-id", help="VPC of the container instances (target-group)")
    return p


def render(args: argparse.Namespace, environ: dict[str, str]) -> dict[str, object]:
    def need(*flags: str) -> None:
        missing = [f for f in flags if not getattr(args, f.lstrip("-").replace("-", "_"))]
        if missing:
            raise ConfigError(f"--what {args.what}: needs {', '.join(missing)}")

    if args.what == "target-group":
        need("--vpc-id")
        return ecs.target_group_request(args.vpc_id, name=args.family)
    if args.what == "service":
        need("--cluster", "--target-group-arn")
        return ecs.service_request(
            args.cluster, args.target_group_arn, family=args.family, desired_count=args.desired_count
        )
    need("--image", "--instance-type")
    env = load_env(args.env_file, args.env)
    secrets = parse_secret_refs(args.secret)
    refuse_clear_secrets(env, secrets)  # before the plan: its warnings are not worth printing then
    checked = plan_check(env, args.instance_type, ECS, model_config=args.model_config)
    region = require_region(args.region, environ, args.profile)
    for warning in checked.warnings:
        print(f"render: plan warning: {warning}", file=sys.stderr)
    print(f"render: {note(ECS)}", file=sys.stderr)
    if not args.create_log_group:
        print(
            f"render: create the log group once: aws logs create-log-group --log-group-name {args.log_group} "
            f"--region {region}",
            file=sys.stderr,
        )
    return ecs.task_definition(
        args.image,
        checked.instance,
        env,
        family=args.family,
        region=region,
        log_group=args.log_group,
        execution_role_arn=args.execution_role_arn,
        task_role_arn=args.task_role_arn,
        create_log_group=args.create_log_group,
        secrets=secrets,
    )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        doc = render(args, dict(os.environ))
    except NeuronServeError as err:
        print(f"render: error: {err}", file=sys.stderr)
        return err.exit_code
    # No secret value reaches a task definition (refused above); masked all the same, by the one rule.
    print(masked_json(doc, {}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
