"""config/cachehome.py: NEURONSERVE_CACHE_HOME, else `neuronserve` under XDG_CACHE_HOME, else under
~/.cache: the rule scripts/bootstrap follows for the venv, so both find the same directory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from neuronserve.config.cachehome import cache_home

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("env", "home"),
    [
        ({"NEURONSERVE_CACHE_HOME": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/c"),
        ({"NEURONSERVE_CACHE_HOME": "  ", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/neuronserve"),
        ({"XDG_CACHE_HOME": "", "HOME": "/h"}, "/h/.cache/neuronserve"),
        ({}, "/root/.cache/neuronserve"),
    ],
)
def test_the_cache_home(env: dict[str, str], home: str) -> None:
    assert cache_home(env) == Path(home)


def test_scripts_bootstrap_follows_the_same_rule() -> None:
    """The bootstrap script's own line, run by bash with the same variables, names the same directory."""
    line = next(
        ln for ln in (ROOT / "scripts" / "bootstrap").read_text().splitlines() if ln.startswith("cache_home=")
    )
    for env in ({"XDG_CACHE_HOME": "/x", "HOME": "/h"}, {"HOME": "/h"}, {"NEURONSERVE_CACHE_HOME": "/c"}):
        out = subprocess.run(
            ["bash", "-c", f'{line}; printf %s "$cache_home"'],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/h", **env},
            capture_output=True,
            text=True,
            check=True,
        )
        assert Path(out.stdout) == cache_home({"HOME": "/h", **env})
