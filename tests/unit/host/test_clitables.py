"""The packaged vLLM option tables (host/clitables.py): every lane's table and the CPU engine's ship inside
the package, load once, and a missing one is named with the ones there are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronserve.host import clitables
from neuronserve.host.facts import gather
from neuronserve.plan.lanes.registry import LANES

PACKAGE_DATA = Path(clitables.__file__).resolve().parents[1] / "data"


def test_every_lane_table_is_packaged() -> None:
    names = clitables.table_names()
    assert {lane.cli_table for lane in LANES.values()} <= set(names)
    assert "vllm-0.32.0-cli.json" in names  # the CPU image's vLLM (docker/versions.env VLLM_CPU_VERSION)


def test_tables_are_the_files_in_the_package() -> None:
    """One copy: what the loader reads is the file under src/neuronserve/data (pyproject's package-data)."""
    for name in clitables.table_names():
        assert clitables.load(name) == json.loads((PACKAGE_DATA / name).read_text())
    assert clitables.load("vllm-0.11.0-cli.json") is clitables.load("vllm-0.11.0-cli.json")  # once


def test_table_name_drops_the_local_version_label() -> None:
    assert clitables.table_name("0.11.0+cpu") == "vllm-0.11.0-cli.json"
    assert clitables.table_name("0.32.0") == "vllm-0.32.0-cli.json"


def test_missing_table_names_the_packaged_ones() -> None:
    with pytest.raises(LookupError, match=r"no vLLM option table vllm-9\.9\.9-cli\.json .*vllm-0\.11\.0"):
        clitables.load("vllm-9.9.9-cli.json")


def test_gather_gives_the_plan_every_table() -> None:
    facts = gather({})
    assert facts.option_tables is not None
    assert set(facts.option_tables) == set(clitables.table_names())
    assert "--max-model-len" in facts.option_tables["vllm-0.11.0-cli.json"]["options"]
