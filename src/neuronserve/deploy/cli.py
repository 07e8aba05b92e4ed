"""Command lines for sagemaker/deploy.py, describe, invoke.py, delete.py and autoscale.py.

One parser per action; every check that needs no AWS runs before the first call, and a ConfigError
is printed as one line (exit 2), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from neuronserve.errors import NeuronServeError


def _session(args: argparse.Namespace) -> Any:
    import boto3

    return boto3.Session(profile_name=args.profile, region_name=args.region)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--region", help="AWS region (default: the profile's)")
    parser.add_argument("--profile", help="AWS profile name")


def _deploy(args: argparse.Namespace) -> int:
    from neuronserve.deploy.endpoint import DeploySpec, deploy, validate
    from neuronserve.deploy.envfile import load_env

    spec = DeploySpec(
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
    )
    tp = validate(spec)
    print(
        f"deploy: {spec.endpoint_name} on {spec.instance_count}x {spec.instance_type} (tp={tp})",
        file=sys.stderr,
    )
    if args.dry_run:
        from neuronserve.deploy.endpoint import container_request, variant_request

        print(json.dumps({"container": container_request(spec), "variant": variant_request(spec)}, indent=2))
        return 0
    session = _session(args)
    deploy(spec, session=session, region=session.region_name, wait=args.wait)
    print(spec.endpoint_name)
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
    client = runtime_client(_session(args), args.region)
    if args.stream:
        for text in invoke_stream(client, args.name, body):
            print(text, end="", flush=True)
        print()
    else:
        print(json.dumps(invoke(client, args.name, body, args.custom_attributes), indent=2))
    return 0


def _delete(args: argparse.Namespace) -> int:
    from neuronserve.deploy.endpoint import delete

    session = _session(args)
    deleted = delete(args.name, session=session, region=session.region_name)
    print(f"deleted: {', '.join(deleted) or 'nothing (already gone)'}")
    return 0


def _autoscale(args: argparse.Namespace) -> int:
    from neuronserve.deploy.autoscale import apply, policy_request, scalable_target_request

    target = scalable_target_request(args.name, args.variant, args.min, args.max)
    policy = policy_request(args.name, args.variant, args.target)
    if args.dry_run:
        print(json.dumps({"target": target, "policy": policy}, indent=2))
        return 0
    client = _session(args).client("application-autoscaling")
    print(apply(client, target, policy))
    return 0


def build_parser(action: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"sagemaker/{action}.py")
    _common(parser)
    parser.add_argument("--name", required=True, help="endpoint name (model and config names derive from it)")
    if action == "deploy":
        parser.add_argument("--image", required=True, help="ECR image URI of neuronserve")
        parser.add_argument("--role", required=True, help="SageMaker execution role ARN")
        parser.add_argument("--instance-type", required=True, help="e.g. ml.inf2.xlarge")
        parser.add_argument("--model-data", help="s3://bucket/prefix/ (uncompressed, ends with '/')")
        parser.add_argument("--env-file", help="KEY=VALUE file (samples in sagemaker/envs/)")
        parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="over the file")
        parser.add_argument("--instance-count", type=int, default=1)
        parser.add_argument("--startup-timeout", type=int, default=3600, help="health-check timeout, s")
        parser.add_argument("--download-timeout", type=int, default=3600, help="model download timeout, s")
        parser.add_argument("--volume-size", type=int, help="GB (default by instance type)")
        parser.add_argument("--wait", action="store_true", help="wait until InService")
        parser.add_argument("--dry-run", action="store_true", help="print the requests, call nothing")
    elif action == "invoke":
        parser.add_argument("--prompt", default="What is the capital of France?")
        parser.add_argument("--body", help="JSON body (default: a TGI-style generate request)")
        parser.add_argument("--stream", action="store_true", help="InvokeEndpointWithResponseStream")
        parser.add_argument("--custom-attributes", help="X-Amzn-SageMaker-Custom-Attributes")
    elif action == "autoscale":
        parser.add_argument("--variant", default="AllTraffic")
        parser.add_argument("--min", type=int, default=1)
        parser.add_argument("--max", type=int, default=4)
        parser.add_argument("--target", type=float, default=10.0, help="invocations per instance per minute")
        parser.add_argument("--dry-run", action="store_true")
    return parser


_ACTIONS = {
    "deploy": _deploy,
    "describe": _describe,
    "invoke": _invoke,
    "delete": _delete,
    "autoscale": _autoscale,
}


def main(action: str, argv: Sequence[str] | None = None) -> int:
    args = build_parser(action).parse_args(argv)
    try:
        return _ACTIONS[action](args)
    except NeuronServeError as err:
        print(f"{action}: error: {err}", file=sys.stderr)
        return err.exit_code
