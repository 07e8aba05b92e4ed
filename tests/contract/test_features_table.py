"""docs/FEATURES.md's table of every feature pair is what the contract run shows (tests/contract/pairs.py
writes it: `python -m tests.contract.pairs --write` after a change the table no longer matches)."""

from __future__ import annotations

import pytest
from tests.contract import pairs, sources
from tests.contract.session import Run

if (REASON := sources.missing()) is not None:
    pytest.skip(REASON, allow_module_level=True)


def test_the_feature_pair_table_is_the_runs(contract: Run) -> None:
    assert pairs.documented() == pairs.table(contract), "run python -m tests.contract.pairs --write"
