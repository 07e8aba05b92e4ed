"""Print an ECS task definition for a Neuron container instance. Usage:

    python ecs/render.py --image URI --instance-type inf2.xlarge \
        --env-file sagemaker/envs/X.env > taskdef.json

See docs/DEPLOY.md, "ECS".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

try:
    from neuronserve.deploy.ecs import task_definition
    from neuronserve.deploy.envfile import load_env
except ImportError:  # run from a checkout without installing neuronserve
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from neuronserve.deploy.ecs import task_definition
    from neuronserve.deploy.envfile import load_env
from neuronserve.errors import NeuronServeError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ecs/render.py")
    parser.add_argument("--image", required=True)
    parser.add_argument("--instance-type", required=True, help="EC2 type, e.g. inf2.xlarge")
    parser.add_argument("--env-file")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--family", default="neuronserve")
    parser.add_argument("--region", default="us-east-1")
    args = parser.parse_args(argv)
    try:
        env = load_env(args.env_file, args.env)
        doc = task_definition(args.image, args.instance_type, env, family=args.family, region=args.region)
    except NeuronServeError as err:
        print(f"render: error: {err}", file=sys.stderr)
        return err.exit_code
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
