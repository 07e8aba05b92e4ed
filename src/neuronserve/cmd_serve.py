"""`neuronserve serve`: placeholder until its issue lands. Keep top-level imports light (stdlib only)."""

from __future__ import annotations

import argparse
from typing import Any

from neuronserve.errors import NeuronServeError


def add_arguments(sub: Any) -> None:
    sub.add_parser("serve", help="(not implemented yet)")


def run(args: argparse.Namespace, environ: dict[str, str]) -> int:
    raise NeuronServeError("'serve' is not implemented yet")
