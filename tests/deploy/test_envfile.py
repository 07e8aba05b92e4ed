"""Environment files for the deploy tools (deploy/envfile.py): lines, then flags; malformed lines and
SageMaker's size limits refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronserve.deploy.envfile import load_env, parse_env_lines
from neuronserve.errors import ConfigError


def test_env_file_then_flags(tmp_path: Path) -> None:
    f = tmp_path / "x.env"
    f.write_text("# comment\n\nSM_VLLM_MAX_MODEL_LEN=2048\nSM_NEURON_BUCKETS=[1,2]\nEMPTY=\nA=b=c\n")
    env = load_env(str(f), ["SM_VLLM_MAX_MODEL_LEN=4096", "NEW=1"])
    assert env == {
        "SM_VLLM_MAX_MODEL_LEN": "4096",
        "SM_NEURON_BUCKETS": "[1,2]",
        "EMPTY": "",
        "A": "b=c",
        "NEW": "1",
    }


@pytest.mark.parametrize("line", ["no-equals", "1BAD=x", "=x", "SPACE KEY=x"])
def test_env_file_rejects_malformed_lines(line: str) -> None:
    with pytest.raises(ConfigError, match="src:1"):
        parse_env_lines([line], "src")


def test_env_size_limits() -> None:
    with pytest.raises(ConfigError, match="1024 bytes"):
        load_env(None, ["A=" + "x" * 1025])
    with pytest.raises(ConfigError, match="32768"):
        load_env(None, [f"K{i}={'x' * 1000}" for i in range(40)])
