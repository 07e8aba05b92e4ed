"""Command line entry point: reads the process environment ONCE and hands a mapping to each command.

Subcommands live in their own modules (`commands/plan`, `serve`, `stage`, `cache`, `compile`, `deploy`)
and are imported lazily, so `neuronserve plan` never imports the server or S3 stacks and answers fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping, Sequence

from neuronserve import __version__
from neuronserve.errors import NeuronServeError

_COMMANDS = {
    "plan": "neuronserve.commands.plan",
    "serve": "neuronserve.commands.serve",
    "stage": "neuronserve.commands.stage",
    "cache": "neuronserve.commands.cache",
    "compile": "neuronserve.commands.compile",
    "deploy": "neuronserve.commands.deploy",
}


def _split_extra(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Everything after the first bare `--` is passed verbatim to the engine."""
    args = list(argv)
    if "--" in args:
        i = args.index("--")
        return args[:i], args[i + 1 :]
    return args, []


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neuronserve",
        description="Serve LLMs with vLLM on AWS Inferentia2/Trainium (or the CPU) "
        "behind the SageMaker contract.",
        epilog="Arguments after `--` are passed verbatim to the vLLM engine.",
    )
    parser.add_argument("--version", action="version", version=f"neuronserve {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in _COMMANDS.values():
        importlib.import_module(module_name).add_arguments(sub)
    return parser


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    own, extra = _split_extra(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if environ is None else environ)
    parser = build_parser()
    args = parser.parse_args(own)
    args.extra_args = extra
    module = importlib.import_module(_COMMANDS[args.command])
    try:
        code: int = module.run(args, env)
    except NeuronServeError as err:
        print(f"neuronserve {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    return code
