"""Running the checkout's own commands (scripts/neuronserve, scripts/serve-local) as a user does, from tests.

`user_env`: this shell less the test runner's PYTHONPATH and venv (so a command finds only what it sets
up itself). `bootstrap_env`: that, plus NEURONSERVE_VENV naming the venv the tests run in, so
scripts/bootstrap (which those commands call) reuses it instead of building the venv its hash names:
under scripts/test they are the same venv. A venv that is not a scripts/bootstrap venv (no `.complete`)
is never handed over (bootstrap would rebuild it in place): the test skips, naming why.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

# Outside variables that would let a command's Python see another copy of the code or another venv.
DROPPED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")


def user_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return {**env, **(extra or {})}


def bootstrap_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    venv = Path(sys.prefix)
    if not (venv / ".complete").exists():
        pytest.skip(f"{venv} is not a scripts/bootstrap venv: run through scripts/test")
    return user_env({"NEURONSERVE_VENV": str(venv), **(extra or {})})
