"""gather (host/facts.py): the facts of this process and of the model paths it was given, on real files
in a temporary directory: which model paths are read, SageMaker's model directory, the Python and the
CPUs. Edge cases from mutation testing among them (docs/TESTING.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from tests.support.host_files import gathered, write_model

from neuronserve.host.facts import gather


def test_sagemaker_model_dir_defaults_to_opt_ml_model(tmp_path: Path) -> None:
    """SM_MODEL_DIR unset or blank: SageMaker's /opt/ml/model."""
    for env in ({}, {"SM_MODEL_DIR": "  "}):
        assert gather(env).sagemaker_model_dir == "/opt/ml/model"


def test_model_paths_read_are_the_local_ones(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Read: a path with a separator (a hub id "org/name" too: it is reported missing) and a bare name that
    exists here. Not read: s3:// URIs, empty entries, a bare hub name like "gpt2" that is no local path, and
    an empty or missing SM_MODEL_DIR."""
    monkeypatch.chdir(tmp_path)
    write_model(tmp_path / "local", {"model_type": "llama"})
    (tmp_path / "empty").mkdir()
    f = gather(
        {"SM_MODEL_DIR": str(tmp_path / "empty")},
        ["s3://bucket/model", "", "gpt2", "org/name", "local"],
    )
    assert sorted(f.paths) == ["local", "org/name"]
    assert f.paths["org/name"].kind == "missing" and f.paths["local"].config == {"model_type": "llama"}
    assert f.sagemaker_model_dir_nonempty is False


def test_a_nonempty_sagemaker_dir_is_read(tmp_path: Path) -> None:
    """A model in SM_MODEL_DIR (SageMaker's model data) is read like any local model."""
    model = write_model(tmp_path / "opt-ml-model", {"model_type": "qwen2"})
    f = gather({"SM_MODEL_DIR": str(model)})
    assert f.sagemaker_model_dir_nonempty is True and f.paths[str(model)].config == {"model_type": "qwen2"}


def test_python_and_cpus_are_this_process(tmp_path: Path) -> None:
    """The engine is started with this Python, and CPU replicas are bound to the CPUs this process may
    use (its own affinity, not another process's): checked by narrowing the affinity to one CPU."""
    assert gathered(tmp_path).python == sys.executable
    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("needs two CPUs to narrow the affinity")
    os.sched_setaffinity(0, {max(before)})
    try:
        f = gathered(tmp_path)
    finally:
        os.sched_setaffinity(0, before)
    assert f.cpus == (max(before),)


def test_python_falls_back_to_python3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An embedded interpreter has no sys.executable: the plan runs `python3`."""
    monkeypatch.setattr(sys, "executable", "")
    assert gathered(tmp_path).python == "python3"


def test_the_installed_nxd_inference_registry_is_a_fact(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The registry host/nxdi.py reads from the installed package reaches the plan as HostFacts; none
    installed here (the dev venv has no NxD Inference), None."""
    pkg = tmp_path / "site" / "neuronx_distributed_inference"
    (pkg / "utils").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "utils" / "constants.py").write_text('MODEL_TYPES = {"llama": {"causal-lm": C}}\n')
    assert gathered(tmp_path).nxdi_models is None
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert gathered(tmp_path).nxdi_models == {"llama": ("causal-lm",)}
