"""`neuronserve stage`: stage the model and compiled artifacts, print where they are, exit.

For pre-warming a volume and for ECS and EKS init containers: the serving container then finds complete
copies (manifests present) and starts without a download. HF_TOKEN_SECRET_ARN is resolved as `serve`
resolves it (host/secrets.py). Top-level imports stay light (stdlib only).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any


def add_arguments(sub: Any) -> None:
    p = sub.add_parser(
        "stage", help="stage the model and compiled artifacts (S3, archive, cache), print where"
    )
    p.add_argument(
        "--json", action="store_true", help='print {"model_dir", "artifacts_dir", "cache"} as JSON'
    )
    p.add_argument("--device", choices=["neuron", "cpu"], default=None, help="plan for this device")


def run(args: argparse.Namespace, environ: dict[str, str]) -> int:
    from neuronserve.host.secrets import with_secrets  # noqa: PLC0415
    from neuronserve.launchplan import resolve_plan  # noqa: PLC0415
    from neuronserve.stage import stage_all  # noqa: PLC0415

    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s"
        )
    # HF_TOKEN from HF_TOKEN_SECRET_ARN, as `serve` reads it: a stage initContainer fetches a gated hub
    # model before the server starts (deploy/k8s/pod.py), with the same settings.
    environ = with_secrets(environ)
    plan = resolve_plan(environ, device=args.device, extra_args=getattr(args, "extra_args", ()))
    from neuronserve.stage.cache import CacheMissError  # noqa: PLC0415

    try:
        result = stage_all(plan, environ)
    except CacheMissError as err:
        if args.json:  # the same answer as a document, then the error (exit 1)
            print(json.dumps({"model_dir": None, "artifacts_dir": None, "cache": "miss", "error": str(err)}))
        raise
    if args.json:
        print(
            json.dumps(
                {"model_dir": result.model_dir, "artifacts_dir": result.artifacts_dir, "cache": result.cache}
            )
        )
    else:
        print(f"model_dir: {result.model_dir}")
        print(f"artifacts_dir: {result.artifacts_dir}")
        print(f"cache: {result.cache}")
    return 0
