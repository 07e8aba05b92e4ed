"""Where neuronserve keeps its own files outside the work directory: test models and the dev venv.

NEURONSERVE_CACHE_HOME (its row in hosttable.py) when set, else `neuronserve` under the XDG cache
directory: XDG_CACHE_HOME, else ~/.cache (the XDG Base Directory Specification,
https://specifications.freedesktop.org/basedir-spec/latest/). scripts/bootstrap follows the same rule
for the venv, so `python -m neuronserve.models_local` and the tests find what it built.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from neuronserve.config.table import VARS


def cache_home(environ: Mapping[str, str]) -> Path:
    """The cache home `environ` names."""
    own = VARS["NEURONSERVE_CACHE_HOME"].read(environ)
    if own:
        return Path(own)
    xdg = environ.get("XDG_CACHE_HOME") or os.path.join(environ.get("HOME", "/root"), ".cache")
    return Path(xdg) / "neuronserve"
