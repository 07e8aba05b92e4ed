"""The environment the command tests start from: a local Llama model and a work dir under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.host_files import LLAMA, write_model


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "SM_VLLM_MODEL": str(write_model(tmp_path / "tiny", LLAMA)),
        "SM_MODEL_DIR": str(tmp_path / "none"),
        "NEURONSERVE_WORK_DIR": str(tmp_path),
    }
