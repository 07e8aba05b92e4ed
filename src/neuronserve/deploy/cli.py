"""Command lines for sagemaker/deploy.py, update.py, describe.py, invoke.py, delete.py and autoscale.py.

One parser per action; every check that needs no AWS runs before the first call, and a ConfigError
is printed as one line (exit 2), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from neuronserve.errors import ConfigError, NeuronServeError

# `--model-config` of every renderer (SageMaker here, ecs/render.py, `neuronserve deploy k8s`).
MODEL_CONFIG_HELP = (
    "the model's config.json (a file, or a directory holding one), for a model on S3 or the hub: the HBM "
    "fit is checked at render, before an instance starts or a weight is downloaded"
)


def _session(args: argparse.Namespace) -> Any:
    """A boto3 session in the region the AWS CLI would use (deploy/region.py): never a silent default."""
    import boto3

    from neuronserve.deploy.region import require_region

    region = require_region(args.region, args.environ, args.profile)
    return boto3.Session(profile_name=args.profile, region_name=region)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--region",
        help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, then the profile's, as the AWS CLI)",
    )
    parser.add_argument("--profile", help="AWS profile name")


def _kv(items: Sequence[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def _spec(args: argparse.Namespace) -> Any:
    from neuronserve.deploy.envfile import load_env
    from neuronserve.deploy.spec import DeploySpec

    return DeploySpec(
        name=args.name,
        image_uri=args.image,
        role_arn=args.role,
        instance_type=args.instance_type,
        env=load_env(args.env_file, args.env),
        model_data_s3=args.model_data,
        instance_count=args.instance_count,
        startup_timeout_s=args.startup_timeout,
        download_timeout_s=args.download_timeout,
        volume_gb=args.volume_size,
        tags=_kv(args.tag, "--tag"),
        subnets=tuple(args.subnet),
        security_groups=tuple(args.security_group),
        kms_key=args.kms_key,
        network_isolation=args.network_isolation,
        async_output_s3=args.async_output,
        async_failure_s3=args.async_failure,
        async_max_concurrent=args.async_max_concurrent,
        hf_token_secret_arn=args.hf_token_secret_arn,
    )


def _clear_secret_warning(action: str, spec: Any) -> None:
    """Secrets given in clear end up in the Model's Environment, readable by sagemaker:DescribeModel."""
    from neuronserve.deploy.secrets import clear_secrets

    names = clear_secrets(spec.env)
    if names:
        print(
            f"{action}: warning: {', '.join(names)} would be stored in plain text in the model's "
            "Environment (anyone with sagemaker:DescribeModel reads it): store the Hugging Face token in "
            "Secrets Manager and pass --hf-token-secret-arn ARN instead (docs/DEPLOY.md, 'Secrets')",
            file=sys.stderr,
        )


def _checked(action: str, spec: Any, model_config: str | None) -> Any:
    """The spec's checks and the container's plan (deploy/speccheck.py); its warnings and the driver
    note on stderr, as every deploy path prints them."""
    from neuronserve.deploy.driver import note
    from neuronserve.deploy.speccheck import validate

    checked = validate(spec, model_config)
    for warning in checked.warnings:
        print(f"{action}: plan warning: {warning}", file=sys.stderr)
    _clear_secret_warning(action, spec)
    print(f"{action}: {note('sagemaker')}", file=sys.stderr)
    return checked


def _deploy(args: argparse.Namespace) -> int:
    from neuronserve.deploy.endpoint import deploy
    from neuronserve.deploy.secrets import masked_json
    from neuronserve.deploy.spec import config_request, model_request
    from neuronserve.deploy.validate import cores_used, tensor_parallel

    spec = _spec(args)
    checked = _checked("deploy", spec, args.model_config)
    tp, cores = tensor_parallel(checked.plan), cores_used(checked.plan)
    print(
        f"deploy: {spec.endpoint_name} on {spec.instance_count}x {spec.instance_type} (tp={tp}, "
        f"{cores} of {checked.visible_cores} NeuronCores)",
        file=sys.stderr,
    )
    if args.dry_run:
        print(masked_json({"model": model_request(spec), "config": config_request(spec)}, spec.env))
        return 0
    session = _session(args)
    deploy(spec, session=session, region=session.region_name, wait=args.wait, poll_s=args.poll_seconds)
    print(spec.endpoint_name)
    return 0


def _update(args: argparse.Namespace) -> int:
    from neuronserve.deploy.rollout import Rollout, update, update_request
    from neuronserve.deploy.secrets import masked_json

    spec = _spec(args)
    _checked("update", spec, args.model_config)
    rollout = Rollout(
        traffic=args.traffic,
        canary_percent=args.canary_percent,
        wait_interval_s=args.wait_interval,
        termination_wait_s=args.termination_wait,
        alarms=tuple(args.alarm),
    )
    if args.dry_run:
        print(masked_json(update_request(spec, rollout), spec.env))
        return 0
    session = _session(args)
    result = update(
        spec, rollout, session=session, region=session.region_name, wait=args.wait, poll_s=args.poll_seconds
    )
    print(json.dumps(result, indent=2))
    return 0


def _describe(args: argparse.Namespace) -> int:
    from neuronserve.deploy.endpoint import describe

    session = _session(args)
    print(json.dumps(describe(args.name, session=session, region=session.region_name), indent=2))
    return 0


def _invoke(args: argparse.Namespace) -> int:
    from neuronserve.deploy.invoke import invoke, invoke_stream, runtime_client

    body = (
        json.loads(args.body) if args.body else {"inputs": args.prompt, "parameters": {"max_new_tokens": 64}}
    )
    session = _session(args)
    client = runtime_client(session, session.region_name)
    if args.async_input:
        from neuronserve.deploy.asyncinvoke import result, submit

        s3 = session.client("s3", region_name=session.region_name)
        locations = submit(client, s3, args.name, body, args.async_input, timeout_s=args.timeout)
        print(json.dumps(locations), file=sys.stderr)
        print(
            json.dumps(
                result(s3, locations, poll_s=args.poll_seconds, timeout_s=args.timeout + 300), indent=2
            )
        )
    elif args.stream:
        for text in invoke_stream(client, args.name, body):
            print(text, end="", flush=True)
        print()
    else:
        print(json.dumps(invoke(client, args.name, body, args.custom_attributes), indent=2))
    return 0


def _delete(args: argparse.Namespace) -> int:
    from neuronserve.deploy.endpoint import delete

    session = _session(args)
    deleted = delete(args.name, session=session, region=session.region_name, poll_s=args.poll_seconds)
    print(f"deleted: {', '.join(deleted) or 'nothing (already gone)'}")
    return 0


def _autoscale(args: argparse.Namespace) -> int:
    from neuronserve.deploy.autoscale import apply, policy_request, scalable_target_request

    target = scalable_target_request(args.name, args.variant, args.min, args.max)
    policy = policy_request(args.name, args.variant, args.target, metric=args.metric)
    if args.dry_run:
        print(json.dumps({"target": target, "policy": policy}, indent=2))
        return 0
    client = _session(args).client("application-autoscaling")
    print(apply(client, target, policy))
    return 0


def _spec_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--image", required=True, help="ECR image URI of neuronserve")
    parser.add_argument("--role", required=True, help="SageMaker execution role ARN")
    parser.add_argument("--instance-type", required=True, help="e.g. ml.inf2.xlarge (or inf2.xlarge)")
    parser.add_argument("--model-data", help="s3://bucket/prefix/ (uncompressed, ends with '/')")
    parser.add_argument("--env-file", help="KEY=VALUE file (samples in sagemaker/envs/)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="over the file")
    parser.add_argument(
        "--hf-token-secret-arn",
        metavar="ARN",
        help="Secrets Manager secret holding HF_TOKEN: the container reads it at start (the execution "
        "role needs secretsmanager:GetSecretValue on it); keeps the token out of the model's Environment",
    )
    parser.add_argument("--instance-count", type=int, default=1)
    parser.add_argument("--startup-timeout", type=int, default=3600, help="health-check timeout, s")
    parser.add_argument("--download-timeout", type=int, default=3600, help="model download timeout, s")
    parser.add_argument("--volume-size", type=int, help="GB (default by instance type; none on trn*)")
    parser.add_argument(
        "--tag", action="append", default=[], metavar="KEY=VALUE", help="on model, config, endpoint"
    )
    parser.add_argument("--subnet", action="append", default=[], help="VPC subnet id (with --security-group)")
    parser.add_argument("--security-group", action="append", default=[], help="VPC security group id")
    parser.add_argument("--kms-key", help="KMS key for the EBS volume and async output (not on trn*)")
    parser.add_argument("--network-isolation", action="store_true", help="no network for the container")
    parser.add_argument("--async-output", help="s3://bucket/path: makes the endpoint asynchronous")
    parser.add_argument("--async-failure", help="s3://bucket/path for failed async requests")
    parser.add_argument("--async-max-concurrent", type=int, help="async requests per instance (1-1000)")
    parser.add_argument("--wait", action="store_true", help="wait until InService")
    parser.add_argument("--dry-run", action="store_true", help="print the requests, call nothing")
    parser.add_argument("--model-config", metavar="PATH", help=MODEL_CONFIG_HELP)


def build_parser(action: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"sagemaker/{action}.py")
    _common(parser)
    parser.add_argument("--name", required=True, help="endpoint name (model and config names derive from it)")
    parser.add_argument("--poll-seconds", type=float, default=15.0, help=argparse.SUPPRESS)
    if action in ("deploy", "update"):
        _spec_flags(parser)
    if action == "update":
        parser.add_argument("--traffic", default="all-at-once", choices=["all-at-once", "canary"])
        parser.add_argument("--canary-percent", type=int, default=25, help="%% of the new fleet first")
        parser.add_argument("--wait-interval", type=int, default=600, help="baking period, s (0-3600)")
        parser.add_argument("--termination-wait", type=int, default=600, help="old fleet kept, s (0-3600)")
        parser.add_argument(
            "--alarm", action="append", default=[], help="CloudWatch alarm: rollback if it fires"
        )
    elif action == "invoke":
        parser.add_argument("--prompt", default="What is the capital of France?")
        parser.add_argument("--body", help="JSON body (default: a TGI-style generate request)")
        parser.add_argument("--stream", action="store_true", help="InvokeEndpointWithResponseStream")
        parser.add_argument("--custom-attributes", help="X-Amzn-SageMaker-Custom-Attributes")
        parser.add_argument("--async-input", help="s3://bucket/prefix/: InvokeEndpointAsync via this prefix")
        parser.add_argument("--timeout", type=int, default=3600, help="async invocation timeout, s (1-3600)")
    elif action == "autoscale":
        parser.add_argument("--variant", default="AllTraffic")
        parser.add_argument("--min", type=int, default=1)
        parser.add_argument("--max", type=int, default=4)
        parser.add_argument("--metric", default="invocations", choices=["invocations", "concurrency"])
        parser.add_argument(
            "--target", type=float, default=10.0, help="per instance per minute, or in flight per model"
        )
        parser.add_argument("--dry-run", action="store_true")
    return parser


_ACTIONS = {
    "deploy": _deploy,
    "update": _update,
    "describe": _describe,
    "invoke": _invoke,
    "delete": _delete,
    "autoscale": _autoscale,
}


def main(action: str, argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run one action; `environ` (default: the process environment, read once here) gives the region."""
    args = build_parser(action).parse_args(argv)
    args.environ = dict(os.environ if environ is None else environ)
    try:
        return _ACTIONS[action](args)
    except NeuronServeError as err:
        print(f"{action}: error: {err}", file=sys.stderr)
        return err.exit_code
    except Exception as err:
        # An AWS refusal (AccessDenied, a limit, a bad ARN) is one line naming the service's code.
        from botocore.exceptions import BotoCoreError, ClientError

        if isinstance(err, ClientError):
            error = err.response.get("Error", {})
            print(f"{action}: AWS error: {error.get('Code')}: {error.get('Message')}", file=sys.stderr)
            return 1
        if isinstance(err, BotoCoreError):
            print(f"{action}: AWS error: {err}", file=sys.stderr)
            return 1
        raise
