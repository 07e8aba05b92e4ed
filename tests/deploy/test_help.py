"""Every deploy command answers `--help` (a `%` in a help string once crashed `update.py --help`):
run as a user runs it, exit 0, usage on stdout, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = [*sorted(str(p.relative_to(ROOT)) for p in (ROOT / "sagemaker").glob("*.py")), "ecs/render.py"]
COMMANDS = {script: [sys.executable, str(ROOT / script)] for script in SCRIPTS}
COMMANDS["neuronserve deploy"] = [sys.executable, "-m", "neuronserve", "deploy"]
COMMANDS["neuronserve deploy k8s"] = [sys.executable, "-m", "neuronserve", "deploy", "k8s"]


def test_every_sagemaker_script_is_here() -> None:
    assert {Path(s).stem for s in SCRIPTS} >= {
        "deploy",
        "update",
        "describe",
        "invoke",
        "delete",
        "autoscale",
        "render",
    }


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help(name: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run(
        [*COMMANDS[name], "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: ") and "Traceback" not in result.stderr
