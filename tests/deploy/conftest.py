"""The moto server the deploy tests share within a module (tests/deploy/deploy_support.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from deploy_support import RecordingMotoServer, free_port


@pytest.fixture(scope="module")
def moto_server() -> Iterator[RecordingMotoServer]:
    server = RecordingMotoServer(free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def moto_url(moto_server: RecordingMotoServer) -> str:
    return f"http://127.0.0.1:{moto_server.port}"
