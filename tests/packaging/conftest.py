"""One venv with `pip install .` of this checkout and nothing else (no vLLM, no test tools), as a user on a
laptop makes it: the packaging tier's tests run its `neuronserve` and its Python.

Why cached: resolving and downloading the dependencies takes ~25 s with a warm pip cache, and they change
only with pyproject.toml, so the venv is kept under the cache home (config/cachehome.py), keyed by
pyproject.toml and the Python version, and built whole again when either changes. neuronserve itself is
reinstalled from a copy of src/ on every run (`--no-deps`), so the tests always see the code under test.
The copy keeps the build's egg-info and build/ out of the checkout.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.checkout import user_env

from neuronserve.config.cachehome import cache_home

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
# What `pip install .` reads: the project table, the readme it names, the package.
SOURCES = ("pyproject.toml", "README.md", "src")


def _key() -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()[:16]


def _copy(dest: Path) -> Path:
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, dest / name)
    return dest


def _pip(venv: Path, *args: str) -> None:
    cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *args]
    result = subprocess.run(cmd, env=user_env(), capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The venv: built once per pyproject.toml (locked: several clones may run this at once)."""
    home = cache_home(os.environ)
    home.mkdir(parents=True, exist_ok=True)
    venv = home / f"packaging-venv-{_key()}"
    project = _copy(tmp_path_factory.mktemp("project"))
    with open(home / "packaging.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".complete").exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
            _pip(venv, str(project))  # the dependencies as pyproject.toml declares them, resolved by pip
            (venv / ".complete").touch()
        else:
            _pip(venv, "--no-deps", "--force-reinstall", str(project))
        yield venv
