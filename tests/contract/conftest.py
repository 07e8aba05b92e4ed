"""The contract tier (tests/contract): every test carries the `contract` marker (`pytest -m contract`), and
the session runs the stack once for all of them (tests/contract/session.py). Where the stack cannot be had
(tests/contract/sources.py says why), the modules skip at collection with that reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.contract import sources
from tests.contract.session import Run, run_lanes


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.contract)


@pytest.fixture(scope="session")
def contract(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    reason = sources.missing()
    if reason:
        pytest.skip(reason)
    yield run_lanes(tmp_path_factory.mktemp("contract"))
