"""Neuron without a remote cache: the plan's own artifacts dir survives only as a complete compile.

The test writes files where the plugin would compile (standing in for neuronx-cc); staging and
publishing are the real functions.
"""

from __future__ import annotations

from pathlib import Path

from neuronserve.launchplan import resolve_plan
from neuronserve.stage import publish_artifacts, stage_all
from neuronserve.types import ArtifactSpec, LaunchPlan

NEURON_ENV = {
    "NEURONSERVE_DEVICE": "neuron",
    "NEURON_RT_VISIBLE_CORES": "0-1",
    "SM_VLLM_MAX_MODEL_LEN": "128",
    "SM_VLLM_MAX_NUM_SEQS": "4",
}


def neuron_plan(tmp_path: Path, **extra: str) -> LaunchPlan:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text('{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}')
    env = {
        **NEURON_ENV,
        "SM_VLLM_MODEL": str(model),
        "NEURONSERVE_WORK_DIR": str(tmp_path / "work"),
        "SM_MODEL_DIR": str(tmp_path / "no-opt-ml-model"),
        **extra,
    }
    return resolve_plan(env)


def compile_into(directory: str) -> None:
    Path(directory, "graph.neff").write_bytes(b"n" * 1000)
    Path(directory, "weights").mkdir(exist_ok=True)
    Path(directory, "weights", "tp0.safetensors").write_bytes(b"w" * 500)


def test_plan_owns_its_local_artifacts_dir(tmp_path: Path) -> None:
    spec = neuron_plan(tmp_path).artifacts
    assert spec.mode == "local" and spec.owned
    assert spec.local_dir and spec.local_dir.startswith(str(tmp_path / "work" / "artifacts"))


def test_killed_compile_is_cleared_and_a_finished_one_is_reused(tmp_path: Path) -> None:
    plan = neuron_plan(tmp_path)
    first = stage_all(plan, {})
    assert first.cache == "miss" and first.artifacts_dir == plan.artifacts.local_dir
    compile_into(first.artifacts_dir or "")  # ... and the server is killed before READY

    second = stage_all(plan, {})
    assert second.cache == "miss"
    assert list(Path(second.artifacts_dir or "").iterdir()) == [], "half-written artifacts kept"

    compile_into(second.artifacts_dir or "")
    publish_artifacts(plan, second, {})  # READY: marked complete
    third = stage_all(plan, {})
    assert third.cache == "hit"
    assert Path(third.artifacts_dir or "", "graph.neff").read_bytes() == b"n" * 1000

    Path(third.artifacts_dir or "", "graph.neff").write_bytes(b"short")  # damaged since
    assert stage_all(plan, {}).cache == "miss"


def test_a_directory_the_user_named_is_never_cleared(tmp_path: Path) -> None:
    mine = tmp_path / "precompiled"
    mine.mkdir()
    compile_into(str(mine))
    plan = neuron_plan(tmp_path, NEURON_COMPILED_ARTIFACTS=str(mine))
    assert plan.artifacts == ArtifactSpec("local", str(mine), None, False, owned=False)
    result = stage_all(plan, {})
    assert result.artifacts_dir == str(mine)
    assert (mine / "graph.neff").read_bytes() == b"n" * 1000
