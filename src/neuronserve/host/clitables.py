"""The vLLM option tables shipped inside the package (src/neuronserve/data/vllm-<version>-cli.json): every
long option of each vLLM the plan may launch, as that version's own parser declares it.

Why data, read here: the plan checks every engine flag against the vLLM that will parse it
(plan/flagcheck.py), and that vLLM is not importable where the plan runs (a laptop has none, and the
image's would pull torch: seconds, where `neuronserve plan` answers in well under one). The tables are
made from each version's own `make_arg_parser` by scripts/vllm-cli-table and read here once per process,
as package data so they are there after `pip install .` (pyproject.toml's package-data); the plan is
pure and gets them through HostFacts.option_tables. Tests read the same files (tests/support/vllm_cli.py).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

SUFFIX = "-cli.json"
PREFIX = "vllm-"


def _data() -> Any:
    return resources.files("neuronserve").joinpath("data")


def table_names() -> list[str]:
    """The file names of every packaged table (`vllm-0.11.0-cli.json`, ...), sorted."""
    return sorted(
        entry.name
        for entry in _data().iterdir()
        if entry.name.startswith(PREFIX) and entry.name.endswith(SUFFIX)
    )


def table_name(version: str) -> str:
    """The file name of vLLM `version`'s table (a local version label such as `+cpu` left out)."""
    return f"{PREFIX}{version.split('+', maxsplit=1)[0].strip()}{SUFFIX}"


@cache
def load(name: str) -> dict[str, Any]:
    """One table file: `vllm_version`, `produced_by` and `options` (long option -> dest, takes_value,
    nargs, choices, default, kind, type). LookupError naming the packaged tables when there is none."""
    entry = _data().joinpath(name)
    if not entry.is_file():
        raise LookupError(
            f"no vLLM option table {name} in this neuronserve (have {', '.join(table_names())})"
        )
    doc: dict[str, Any] = json.loads(entry.read_text(encoding="utf-8"))
    return doc


def load_all() -> dict[str, dict[str, Any]]:
    """Every packaged table by file name: what host/facts.py gives the plan (a few ms for all)."""
    return {name: load(name) for name in table_names()}
