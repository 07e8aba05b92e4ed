"""`scripts/neuronserve ...` as a user types it: the checkout's own launcher as a subprocess, with only the
settings the test names (plus what the launcher needs to find its venv), so a test sees the exit code,
stdout and stderr the user sees."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "data" / "models"
# The launcher's own needs: where the venv and its cache are (scripts/bootstrap), and the offline switches.
KEPT = ("PATH", "HOME", "XDG_CACHE_HOME", "NEURONSERVE_CACHE_HOME", "HF_HUB_OFFLINE")


def neuronserve(args: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: os.environ[k] for k in KEPT if k in os.environ}
    full.update({"SM_MODEL_DIR": "/nonexistent", **env})
    return subprocess.run(
        [str(ROOT / "scripts" / "neuronserve"), *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


def model_dir(name: str) -> str:
    """A test model's directory (tests/data/models/NAME: its config.json), as SM_VLLM_MODEL names it."""
    return str(MODELS / name)
