"""The set-up of the `neuronserve compile` tests: the stand-in engine and the session's moto S3 server."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.server import free_port
from tests.support.standin_server import standin_env


@pytest.fixture
def compile_env(tmp_path: Path, s3_env: dict[str, str], bucket: str) -> dict[str, str]:
    """The stand-in engine with the tiny model (tests/support/standin_server.py), writing its events to
    `tmp_path/standin-events.jsonl`, and a compile cache in a fresh bucket of the moto server."""
    return standin_env(tmp_path, free_port(), **s3_env, NEURONSERVE_CACHE_URI=f"s3://{bucket}/cache")
