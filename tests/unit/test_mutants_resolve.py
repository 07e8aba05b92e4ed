"""host/resolve.py cases that mutation testing showed unchecked (issue #16, docs/TESTING.md): which
serving.properties is read when SM_MODEL_DIR is unset or blank, and that a local speculative draft named
in the speculative config is read from disk (so its checks run), through resolve_plan as the CLI calls it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.unit.test_plan_hostfacts import write_model

from neuronserve.errors import ConfigError
from neuronserve.host import facts as hostfacts
from neuronserve.host.resolve import read_settings, resolve_plan

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 1024}


@pytest.mark.parametrize("env", [{}, {"SM_MODEL_DIR": "  "}])
def test_serving_properties_default_to_sagemakers_model_dir(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without SM_MODEL_DIR (or with a blank one) the settings read LMI's serving.properties from
    SageMaker's model directory, /opt/ml/model, where SageMaker unpacks the model archive. The reader is
    wrapped only to see which directory it was given; it still reads the real (absent) file."""
    seen: list[str] = []
    real = hostfacts.read_serving_properties

    def spy(model_dir: str) -> dict[str, str]:
        seen.append(model_dir)
        return real(model_dir)

    monkeypatch.setattr(hostfacts, "read_serving_properties", spy)
    read_settings(env)
    assert seen == ["/opt/ml/model"]


def test_a_local_eagle_draft_is_read_and_checked(tmp_path: Path) -> None:
    """SM_VLLM_SPECULATIVE_CONFIG naming a local EAGLE draft directory: resolve_plan reads that directory
    too, so a draft without lm_head.weight is refused before compiling (not merely warned about as
    "could not check")."""
    target = write_model(tmp_path / "target", LLAMA, {"lm_head.weight": "a"})
    draft = write_model(tmp_path / "draft", {"model_type": "llama"}, {"fc.weight": "a"})
    env = {
        "SM_VLLM_MODEL": str(target),
        "SM_MODEL_DIR": str(tmp_path / "none"),
        "NEURON_RT_VISIBLE_CORES": "0-1",
        "NEURONSERVE_WORK_DIR": str(tmp_path / "work"),
        "SM_VLLM_SPECULATIVE_CONFIG": json.dumps(
            {"method": "eagle", "model": str(draft), "num_speculative_tokens": 4}
        ),
    }
    with pytest.raises(ConfigError) as err:
        resolve_plan(env, device="neuron")
    assert str(err.value) == (
        f"SM_VLLM_SPECULATIVE_CONFIG: EAGLE draft {draft} has no lm_head.weight: copy the target model's "
        "lm_head.weight into the draft checkpoint"
    )
    write_model(draft, {"model_type": "llama"}, {"lm_head.weight": "a"})
    plan = resolve_plan(env, device="neuron")
    assert not any("could not check" in w for w in plan.warnings)
