"""resolve_plan (launchplan.py), as the CLI calls it, on real model directories: serving.properties
in SageMaker's model directory (and which directory is read when SM_MODEL_DIR is unset or blank), local
models checked or refused, and a local speculative draft read from disk so its checks run. Edge cases
from mutation testing among them (docs/TESTING.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.host_files import write_model

from neuronserve.errors import ConfigError
from neuronserve.host import properties
from neuronserve.host.properties import read_serving_properties
from neuronserve.launchplan import read_settings, resolve_plan

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 1024}


def test_serving_properties_and_sagemaker_dir(tmp_path: Path) -> None:
    model = write_model(
        tmp_path / "opt-ml-model",
        {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "max_position_embeddings": 1024},
    )
    (model / "serving.properties").write_text(
        "engine=Python\n# comment\noption.tensor_parallel_degree=2\noption.max_rolling_batch_size=4\n"
    )
    assert read_serving_properties(str(model))["option.tensor_parallel_degree"] == "2"
    env = {
        "SM_MODEL_DIR": str(model),
        "NEURON_RT_VISIBLE_CORES": "0-1",
        "NEURONSERVE_WORK_DIR": str(tmp_path),
    }
    p = resolve_plan(env, device="neuron")
    assert p.model.source == "sagemaker" and p.model.local_path == str(model)
    argv = list(p.argv)
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert argv[argv.index("--max-num-seqs") + 1] == "4"
    assert argv[argv.index("--max-model-len") + 1] == "1024"
    assert any("derived" in w for w in p.warnings)


def test_resolve_refuses_unsupported_local_model(tmp_path: Path) -> None:
    model = write_model(tmp_path / "gpt2", {"model_type": "gpt2", "max_position_embeddings": 1024})
    with pytest.raises(ConfigError) as err:
        resolve_plan(
            {"SM_VLLM_MODEL": str(model), "NEURON_RT_VISIBLE_CORES": "0-1", "SM_MODEL_DIR": "/x"},
            device="neuron",
        )
    assert "gpt2" in str(err.value)


def test_resolve_cpu_local_model(tmp_path: Path) -> None:
    model = write_model(tmp_path / "tiny", {"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    p = resolve_plan(
        {"SM_VLLM_MODEL": str(model), "SM_MODEL_DIR": "/x", "SM_VLLM_ENFORCE_EAGER": "true"},
        device="cpu",
        extra_args=["--seed", "0"],
    )
    assert p.device == "cpu" and p.model.source == "local"
    assert p.argv[1:3] == ("-m", "vllm.entrypoints.openai.api_server")
    assert list(p.argv[-3:]) == ["--enforce-eager", "--seed", "0"]


@pytest.mark.parametrize("env", [{}, {"SM_MODEL_DIR": "  "}])
def test_serving_properties_default_to_sagemakers_model_dir(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without SM_MODEL_DIR (or with a blank one) the settings read LMI's serving.properties from
    SageMaker's model directory, /opt/ml/model, where SageMaker unpacks the model archive. The reader is
    wrapped only to see which directory it was given; it still reads the real (absent) file."""
    seen: list[str] = []
    real = properties.read_serving_properties

    def spy(model_dir: str) -> dict[str, str]:
        seen.append(model_dir)
        return real(model_dir)

    monkeypatch.setattr(properties, "read_serving_properties", spy)
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
