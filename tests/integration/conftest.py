"""Session-scoped real servers: ONE shared `neuronserve serve` on the tiny model for most tests.

Lifecycle tests (SIGTERM, engine kill) run last (test_zz_*) and take the shared server or start a
fresh one; the pool never runs two engines at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.server import Server, ServerPool, base_env
from tests.support.tiny_model import tiny_model_dir

pytestmark = pytest.mark.integration

# Small limits so every error status can be provoked cheaply.
SHARED_SETTINGS = {
    "SM_VLLM_MAX_MODEL_LEN": "512",
    "SM_VLLM_MAX_NUM_SEQS": "16",
    "NEURONSERVE_MAX_CONCURRENCY": "6",
    "SAGEMAKER_MAX_PAYLOAD_IN_MB": "1",
    "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "8",
    "NEURONSERVE_DRAIN_GRACE_S": "20",
}


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    return tiny_model_dir()


@pytest.fixture(scope="session")
def server_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory.mktemp("server-logs"))
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def shared_env(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return base_env(tiny_model, tmp_path_factory.mktemp("work"), **SHARED_SETTINGS)


@pytest.fixture
def server(server_pool: ServerPool, shared_env: dict[str, str]) -> Server:
    return server_pool.get("shared", shared_env)
