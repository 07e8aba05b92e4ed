"""resolve_plan (launchplan.py), as the CLI calls it, on real model directories: serving.properties
in SageMaker's model directory (and which directory is read when SM_MODEL_DIR is unset or blank), local
models checked or refused, and a local speculative draft read from disk so its checks run. Edge cases
from mutation testing among them (docs/TESTING.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.host_files import LLAMA, write_model

from neuronserve.errors import ConfigError
from neuronserve.host import properties
from neuronserve.host.properties import read_serving_properties
from neuronserve.launchplan import read_settings, resolve_plan


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


LLAMA_8B = json.loads(
    (Path(__file__).parents[1] / "data" / "models" / "Llama-3.1-8B" / "config.json").read_text()
)


def test_serving_properties_in_the_model_directory_are_read(tmp_path: Path) -> None:
    """Issue 29: SM_VLLM_MODEL at an LMI model directory: its option.n_positions=4096 is honoured (it was
    dropped, and the plan compiled 131072 tokens, the model's own length, and refused the memory)."""
    from tests.unit.plan.test_build_vllm_cli import run_cli

    model = write_model(tmp_path / "llama", LLAMA_8B)
    (model / "serving.properties").write_text("option.n_positions=4096\noption.tensor_parallel_degree=2\n")
    env = {
        "SM_VLLM_MODEL": str(model),
        "NEURONSERVE_INSTANCE_TYPE": "ml.inf2.xlarge",
        "NEURONSERVE_DEVICE": "neuron",
    }
    proc = run_cli(["--json"], env)
    assert proc.returncode == 0, proc.stderr
    argv = json.loads(proc.stdout)["argv"]
    assert argv[argv.index("--max-model-len") + 1] == "4096"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    settings = read_settings({**env, "SM_MODEL_DIR": str(tmp_path / "none")})
    assert settings.engine["max-model-len"].origin == f"{model / 'serving.properties'} option.n_positions"


def test_the_model_directorys_file_wins_and_says_so(tmp_path: Path) -> None:
    deployment = tmp_path / "opt-ml-model"
    deployment.mkdir()
    (deployment / "serving.properties").write_text(
        "option.n_positions=2048\noption.max_rolling_batch_size=4\n"
    )
    model = write_model(tmp_path / "llama", LLAMA)
    (model / "serving.properties").write_text("option.n_positions=1024\n")
    settings = read_settings({"SM_MODEL_DIR": str(deployment), "SM_VLLM_MODEL": str(model)})
    assert settings.get("max-model-len") == "1024" and settings.get("max-num-seqs") == "4"
    assert settings.engine["max-num-seqs"].origin == "serving.properties option.max_rolling_batch_size"
    assert settings.warnings[-1] == (
        f"{model / 'serving.properties'} option.n_positions=1024 overrides "
        f"{deployment / 'serving.properties'} option.n_positions=2048 (the file beside the served model wins)"
    )


def test_a_model_directory_not_served_is_not_read(tmp_path: Path) -> None:
    """SM_MODEL_DIR holds the model served (HF_MODEL_ID comes after it): HF_MODEL_ID's file is not read."""
    deployment = write_model(tmp_path / "opt-ml-model", LLAMA)
    other = write_model(tmp_path / "other", LLAMA)
    (other / "serving.properties").write_text("option.n_positions=4096\n")
    settings = read_settings({"SM_MODEL_DIR": str(deployment), "HF_MODEL_ID": str(other)})
    assert settings.get("max-model-len") is None


def test_a_lone_serving_properties_names_the_model_with_option_model_id(tmp_path: Path) -> None:
    """LMI's layout: SM_MODEL_DIR holds only serving.properties, and option.model_id is the model (it was
    served from the near-empty SM_MODEL_DIR, option.model_id ignored with a warning)."""
    deployment = tmp_path / "opt-ml-model"
    deployment.mkdir()
    model = write_model(tmp_path / "llama", LLAMA)
    (model / "serving.properties").write_text("option.max_rolling_batch_size=2\n")
    (deployment / "serving.properties").write_text(f"option.model_id={model}\n")
    p = resolve_plan({"SM_MODEL_DIR": str(deployment), "NEURONSERVE_WORK_DIR": str(tmp_path)}, device="cpu")
    assert p.model.uri == str(model) and p.model.source == "local"
    assert p.argv[p.argv.index("--max-num-seqs") + 1] == "2"
