"""Fixtures every image test module shares."""

from __future__ import annotations

import pytest
from image_support import docker_client, podman_missing


@pytest.fixture(scope="module")
def engine() -> str:
    if docker_client() is not None:
        return "docker"
    reason = podman_missing()
    if reason:
        pytest.skip(f"no Docker engine answers and {reason}")
    return "podman"
