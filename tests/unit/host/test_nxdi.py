"""host/nxdi.py: the installed NxD Inference's MODEL_TYPES read from its files, never imported.

The packages here are written to a temporary sys.path entry; their modules raise when imported, so a
reading that imported them would fail."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from neuronserve.host import nxdi

CONSTANTS = """
raise RuntimeError("imported: the registry must be read, not run")
from neuronx_distributed_inference.models.llama.modeling_llama import NeuronLlamaForCausalLM

END_TO_END_MODEL = "e2e_model"
MODEL_TYPES = {
    "llama": {"causal-lm": NeuronLlamaForCausalLM},
    "pixtral": {"causal-lm": NeuronPixtralForCausalLM, "image-encoding": NeuronPixtralForImageEncoding},
    "qwen3_moe": {"causal-lm": NeuronQwen3MoeForCausalLM},
    NOT_A_STRING: {"causal-lm": X},
    "odd": "not a dict",
}
"""


def package(root: Path, constants: str | None) -> None:
    pkg = root / nxdi.PACKAGE
    (pkg / "utils").mkdir(parents=True)
    (pkg / "__init__.py").write_text('raise RuntimeError("imported")\n')
    if constants is not None:
        (pkg / "utils" / "constants.py").write_text(constants)


def test_the_installed_registry_is_read_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package(tmp_path, CONSTANTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert nxdi.installed_model_types() == {
        "llama": ("causal-lm",),
        "pixtral": ("causal-lm", "image-encoding"),
        "qwen3_moe": ("causal-lm",),
    }
    assert nxdi.PACKAGE not in sys.modules


@pytest.mark.parametrize(
    "constants",
    [None, "MODEL_TYPES = {", "OTHER = {'llama': {}}\n", "MODEL_TYPES = dict(llama={})\n", "\udcff"],
)
def test_an_unreadable_registry_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, constants: str | None
) -> None:
    """No constants.py, a syntax error, no MODEL_TYPES, one that is no dict literal, bytes that are not
    UTF-8: None (the plan then says which registry it assumed), never a traceback."""
    if constants == "\udcff":
        package(tmp_path, "")
        (tmp_path / nxdi.PACKAGE / "utils" / "constants.py").write_bytes(b"MODEL_TYPES = {'\xff': {}}\n")
    else:
        package(tmp_path, constants)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert nxdi.installed_model_types() is None


def test_an_annotated_registry_is_read(tmp_path: Path) -> None:
    path = tmp_path / "constants.py"
    path.write_text('MODEL_TYPES: dict = {"llama": {"causal-lm": A}}\n')
    assert nxdi.read_model_types(str(path)) == {"llama": ("causal-lm",)}


def test_nothing_installed_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "site-packages" not in p])
    assert nxdi.installed_model_types() is None
