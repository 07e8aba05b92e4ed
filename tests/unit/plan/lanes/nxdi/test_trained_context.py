"""Issue 42 item 5: max_model_len above max_position_embeddings without a rope scaling that covers it is
planned, as the stack does (vllm-neuron 0.2.2+lts platform_overrides.py:49-54 skips vLLM's length check),
with a warning that names both numbers and the setting the length came from; typed as a user types it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.typed import model_dir, neuronserve

QWEN3_32B = model_dir("Qwen3-32B")
ON_TRN1 = {"SM_VLLM_TENSOR_PARALLEL_SIZE": "32", "SM_VLLM_MAX_NUM_SEQS": "4"}
WARNING = "{var}=65536 is above {model}/config.json max_position_embeddings 40960: "


@pytest.mark.parametrize("var", ["SM_VLLM_MAX_MODEL_LEN", "OPTION_MAX_MODEL_LEN", "OPTION_N_POSITIONS"])
def test_beyond_the_trained_positions_plans_with_both_numbers(var: str) -> None:
    env = {"SM_VLLM_MODEL": QWEN3_32B, **ON_TRN1, var: "65536"}
    proc = neuronserve(["plan", "--instance-type", "trn1.32xlarge"], env)
    assert proc.returncode == 0, proc.stderr
    assert "--max-model-len 65536 " in proc.stdout
    assert WARNING.format(var=var, model=QWEN3_32B) in proc.stdout
    assert "positions past 40960 were never trained" in proc.stdout
    assert f"set {var}=40960 or less" in proc.stdout


def test_serving_properties_names_its_option(tmp_path: Path) -> None:
    (tmp_path / "serving.properties").write_text("option.max_model_len=65536\n")
    env = {"SM_VLLM_MODEL": QWEN3_32B, **ON_TRN1, "SM_MODEL_DIR": str(tmp_path)}
    proc = neuronserve(["plan", "--instance-type", "trn1.32xlarge"], env)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "never trained" in ln)
    assert "max_model_len=65536 is above" in line and "max_position_embeddings 40960" in line
    assert "SM_VLLM_MAX_MODEL_LEN" not in line, line


def test_within_the_trained_positions_says_nothing() -> None:
    env = {"SM_VLLM_MODEL": QWEN3_32B, **ON_TRN1, "SM_VLLM_MAX_MODEL_LEN": "40960"}
    proc = neuronserve(["plan", "--instance-type", "trn1.32xlarge"], env)
    assert proc.returncode == 0, proc.stderr
    assert "never trained" not in proc.stdout


@pytest.mark.parametrize(
    ("scaling", "warned"),
    [
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, None),
        ({"rope_type": "yarn", "factor": 1.5, "original_max_position_embeddings": 32768}, "= 49152"),
        ({"type": "linear", "factor": 2.0}, None),
        ({"rope_type": "llama3", "factor": 8.0}, "max_position_embeddings 40960:"),
    ],
)
def test_a_rope_scaling_that_covers_it_is_read_as_vllm_reads_it(
    tmp_path: Path, scaling: dict[str, object], warned: str | None
) -> None:
    """vLLM 0.11.0 config/model.py:1839-1862: the factor scales max_position_embeddings (yarn: its
    original_max_position_embeddings), except for RoPE types already scaled (llama3, longrope, su)."""
    config = json.loads((Path(QWEN3_32B) / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "rope_scaling": scaling}))
    env = {"SM_VLLM_MODEL": str(tmp_path), **ON_TRN1, "SM_VLLM_MAX_MODEL_LEN": "65536"}
    proc = neuronserve(["plan", "--instance-type", "trn1.32xlarge"], env)
    assert proc.returncode == 0, proc.stderr
    line = next((ln for ln in proc.stdout.splitlines() if "never trained" in ln), None)
    if warned is None:
        assert line is None, line
    else:
        assert line is not None and warned in line, proc.stdout
