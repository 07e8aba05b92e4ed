"""`neuronserve deploy k8s`: EKS manifests from the plan the container will run (docs/DEPLOY.md, "EKS").

Flags follow `ecs/render.py` (`--image`, `--instance-type`, `--env-file`, `--env KEY=VALUE`,
`--secret KEY=...`), plus what a Kubernetes deployment needs. YAML goes to stdout, or with `--output
DIR` one file per object and kustomizations `kubectl apply -k` takes; notes go to stderr. What the
container would refuse at start exits 2 and renders nothing. Top-level imports stay light: the
renderer is imported when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_arguments(sub: Any) -> None:
    p = sub.add_parser(
        "deploy",
        help="render deployment manifests from the plan the container will run",
        description="Render the objects that run neuronserve somewhere, checked by the container's own plan.",
    )
    targets = p.add_subparsers(dest="target", required=True, metavar="TARGET")
    k8s = targets.add_parser(
        "k8s",
        help="EKS: Deployment, Service, PDB, ServiceAccount, ConfigMap, compile Job, KEDA/HPA autoscaling",
        description="Render EKS manifests for the Neuron device plugin and scheduler extension. Exit 2 when "
        "the container would refuse the configuration; nothing is rendered then.",
    )
    k8s.add_argument(
        "--image", required=True, help="image URI, e.g. ACCOUNT.dkr.ecr.REGION.amazonaws.com/neuronserve:TAG"
    )
    k8s.add_argument(
        "--instance-type", required=True, help="node instance type, e.g. inf2.xlarge (or ml.inf2.xlarge)"
    )
    k8s.add_argument("--env-file", help="KEY=VALUE file (samples in sagemaker/envs/)")
    k8s.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="over the file")
    k8s.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="KEY=SECRET/KEY",
        help="a variable from a Kubernetes Secret's key (secretKeyRef), or "
        "HF_TOKEN=arn:aws:secretsmanager:... (read by the container with the pod's IRSA role); a secret "
        "value in --env is refused",
    )
    k8s.add_argument("--output", metavar="DIR", help="write one file per object and kustomization.yaml files")
    k8s.add_argument("--name", default="neuronserve", help="name of the objects (default: neuronserve)")
    k8s.add_argument("--namespace", default="default")
    k8s.add_argument("--replicas", type=int, default=1, help="pods when not autoscaled")
    k8s.add_argument("--role-arn", help="IAM role for the pods' S3 and Secrets Manager calls (IRSA)")
    k8s.add_argument(
        "--neuron-resource",
        choices=["neuroncore", "device"],
        default="neuroncore",
        help="ask for aws.amazon.com/neuroncore (the plan's cores) or whole aws.amazon.com/neuron devices",
    )
    k8s.add_argument(
        "--scheduler-name", default="my-scheduler", help="the Neuron scheduler extension's scheduler"
    )
    k8s.add_argument("--autoscaler", choices=["none", "keda", "hpa"], default="none")
    k8s.add_argument("--min-replicas", type=int, default=1)
    k8s.add_argument("--max-replicas", type=int, default=4)
    k8s.add_argument(
        "--prometheus-url",
        default="http://prometheus-server.monitoring.svc.cluster.local:80",
        help="the Prometheus server KEDA queries",
    )
    k8s.add_argument(
        "--target-in-flight", type=int, help="sequences in flight per pod (default: the plan's batch)"
    )
    k8s.add_argument(
        "--target-queue", type=int, help="requests waiting per pod (default: a quarter of the batch)"
    )
    k8s.add_argument("--prestop-seconds", type=int, default=15, help="preStop sleep before SIGTERM")
    k8s.add_argument("--no-compile-job", action="store_true", help="leave the compile Job out")
    from neuronserve.deploy.cli import MODEL_CONFIG_HELP  # noqa: PLC0415

    k8s.add_argument("--model-config", metavar="PATH", help=MODEL_CONFIG_HELP)


def run(args: argparse.Namespace, environ: dict[str, str]) -> int:
    del environ  # the pods' environment comes from --env-file and --env, never from this shell
    from neuronserve.deploy.envfile import load_env  # noqa: PLC0415
    from neuronserve.deploy.k8s import yamlout  # noqa: PLC0415
    from neuronserve.deploy.k8s.options import K8sOptions, parse_secrets  # noqa: PLC0415
    from neuronserve.deploy.k8s.render import render  # noqa: PLC0415
    from neuronserve.deploy.secrets import masked_text  # noqa: PLC0415

    env = load_env(args.env_file, args.env)
    refs, token_arn = parse_secrets(args.secret)
    opts = K8sOptions(
        image=args.image,
        instance_type=args.instance_type,
        name=args.name,
        namespace=args.namespace,
        replicas=args.replicas,
        neuron_resource=args.neuron_resource,
        scheduler_name=args.scheduler_name,
        role_arn=args.role_arn,
        autoscaler=args.autoscaler,
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas,
        prometheus_url=args.prometheus_url,
        target_in_flight=args.target_in_flight,
        target_queue=args.target_queue,
        prestop_s=args.prestop_seconds,
        compile_job=not args.no_compile_job,
        secret_refs=refs,
        token_arn=token_arn,
        model_config=args.model_config,
    )
    rendered = render(opts, env)
    for line in rendered.notes:
        print(f"deploy k8s: {masked_text(line, env)}", file=sys.stderr)
    if args.output is None:
        print(yamlout.dump_all(_safe_stream(rendered, opts.namespace)), end="")
        return 0
    directory = Path(args.output)
    yamlout.write(directory, yamlout.layout(rendered.base, rendered.compile, rendered.server))
    print(
        f"deploy k8s: wrote {directory}: {_apply_steps(directory, rendered, opts.namespace)}", file=sys.stderr
    )
    return 0


def _safe_stream(rendered: Any, namespace: str) -> list[dict[str, Any]]:
    """What stdout may hold for `| kubectl apply -f -`: everything when there is no compile Job; else
    the Job with its ServiceAccount and ConfigMap only, since a Deployment applied in the same stream
    starts at once, next to the Job (a pod that compiles too, or waits on a cache the Job has not
    filled). Stderr says so, and how to apply the server once the Job is complete."""
    if not rendered.compile:
        return list(rendered.documents())
    job = rendered.compile[0][1]["metadata"]["name"]
    print(
        "deploy k8s: stdout holds the compile Job only (with its ServiceAccount and ConfigMap): the "
        "Deployment must not start before the Job has filled the compile cache. Apply it, wait, then "
        f"render the server: `... | kubectl apply -f - && kubectl -n {namespace} wait "
        f"--for=condition=complete job/{job} --timeout=...` and the same `neuronserve deploy k8s ...` with "
        "--no-compile-job (or use --output DIR, which writes both in order)",
        file=sys.stderr,
    )
    return [dict(doc) for _, doc in (*rendered.base, *rendered.compile)]


def _apply_steps(directory: Path, rendered: Any, namespace: str) -> str:
    """The commands that apply the directory, the compile Job first when there is one."""
    serve = f"kubectl apply -k {directory}"
    if not rendered.compile:
        return serve
    from neuronserve.deploy.k8s.probes import compile_budget_s  # noqa: PLC0415

    job = rendered.compile[0][1]["metadata"]["name"]
    timeout = 3 * compile_budget_s(rendered.checked.plan)
    return (
        f"kubectl apply -k {directory}/compile && kubectl -n {namespace} wait --for=condition=complete "
        f"job/{job} --timeout={timeout}s && {serve}"
    )
