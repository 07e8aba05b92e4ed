"""Host facts and the resolve_plan shell, on real files in a temporary directory (no device needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronserve.errors import ConfigError
from neuronserve.host.facts import gather, model_facts, read_serving_properties
from neuronserve.host.resolve import resolve_plan
from neuronserve.plan.facts import parse_core_list


@pytest.mark.parametrize(
    ("spec", "cores"),
    [("0-3", [0, 1, 2, 3]), ("0,1", [0, 1]), ("4-5,8", [4, 5, 8]), ("7", [7])],
)
def test_core_list(spec: str, cores: list[int]) -> None:
    assert parse_core_list(spec) == cores


@pytest.mark.parametrize("spec", ["a-b", "3-1", "0,0", "", "-1"])
def test_core_list_refused(spec: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_core_list(spec)
    assert "NEURON_RT_VISIBLE_CORES" in str(err.value)


def test_gather_visible_cores_from_env(tmp_path: Path) -> None:
    f = gather({"NEURON_RT_VISIBLE_CORES": "0-5", "SM_MODEL_DIR": str(tmp_path / "none")})
    assert f.visible_cores == 6 and f.cores_source == "NEURON_RT_VISIBLE_CORES"
    assert f.python and f.sagemaker_model_dir_nonempty is False
    assert set(f.versions) == {"vllm", "vllm-neuron", "neuronx-distributed-inference", "neuronx-cc"}


def write_model(path: Path, config: dict[str, object], weights: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    if weights is not None:
        (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weights}))
    return path


def test_model_facts(tmp_path: Path) -> None:
    m = model_facts(str(write_model(tmp_path / "m", {"model_type": "llama"}, {"lm_head.weight": "a"})))
    assert m.kind == "dir" and m.config == {"model_type": "llama"} and m.has_lm_head is True
    assert m.config_sha256 is not None and len(m.config_sha256) == 64
    d = model_facts(str(write_model(tmp_path / "d", {"model_type": "llama"}, {"fc.weight": "a"})))
    assert d.has_lm_head is False
    assert model_facts(str(tmp_path / "missing")).kind == "missing"


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


def test_gather_visible_cores_from_count(tmp_path: Path) -> None:
    f = gather({"NEURON_RT_NUM_CORES": "4", "SM_MODEL_DIR": str(tmp_path)})
    assert f.visible_cores == 4 and f.cores_source == "NEURON_RT_NUM_CORES"
    with pytest.raises(ConfigError):
        gather({"NEURON_RT_NUM_CORES": "four"})
