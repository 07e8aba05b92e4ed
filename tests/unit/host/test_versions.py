"""Installed versions and the vLLM launch module (host/versions.py), found from files on sys.path: an
installed vLLM is stood in for by a package tree (never imported), versions by `*.dist-info` directories.
Edge cases from mutation testing among them (docs/TESTING.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.support.host_files import gathered

from neuronserve.host.versions import installed_versions
from neuronserve.plan.facts import API_SERVER_MODULE

LAUNCHER_MODULE = "vllm.entrypoints.launchers.api_server.entry"


def fake_vllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *files: str) -> None:
    """An installed vLLM package tree with these files (the module is never imported, only found)."""
    pkg = tmp_path / "site" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for rel in files:
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text("")
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))


@pytest.mark.parametrize(
    ("files", "module"),
    [
        (["entrypoints/openai/api_server.py"], API_SERVER_MODULE),
        (
            ["entrypoints/openai/api_server.py", "entrypoints/launchers/api_server/entry.py"],
            API_SERVER_MODULE,
        ),
        # a vLLM whose openai package no longer has api_server.py but has the launcher
        (["entrypoints/openai/protocol.py", "entrypoints/launchers/api_server/entry.py"], LAUNCHER_MODULE),
        (["entrypoints/__init__.py"], API_SERVER_MODULE),  # neither: the documented default
        # a launcher package without entry.py is not the launcher
        (["entrypoints/launchers/api_server/__init__.py"], API_SERVER_MODULE),
    ],
)
def test_vllm_module_follows_the_installed_tree(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, files: list[str], module: str
) -> None:
    """The engine is launched as the module the installed vLLM has: the OpenAI server when it exists,
    else the launcher entry point; found from the files, without importing vLLM."""
    fake_vllm(monkeypatch, tmp_path, *files)
    assert gathered(tmp_path).vllm_module == module


def test_vllm_module_without_vllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No vLLM installed (sys.modules["vllm"] = None is how Python marks a module as absent): the plan
    still names the OpenAI server module instead of crashing."""
    monkeypatch.setitem(sys.modules, "vllm", None)
    assert gathered(tmp_path).vllm_module == API_SERVER_MODULE


def test_installed_versions_search_order_and_spellings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """sys.path is searched in order (the first hit wins, as for imports), a missing entry is skipped, ""
    is the current directory, names compare as PEP 503 normalises them (case, "-", "_", "."), and only
    *.dist-info directories count (an old *.egg-info does not)."""
    first, second, cwd = tmp_path / "first", tmp_path / "second", tmp_path / "cwd"
    for d in (first, second, cwd):
        d.mkdir()
    (first / "vllm-0.11.0.egg-info").mkdir()
    (second / "vllm-0.12.0.dist-info").mkdir()
    (second / "VLLM_Neuron-0.2.2+lts.dist-info").mkdir()
    (tmp_path / "later").mkdir()
    (tmp_path / "later" / "vllm-0.1.0.dist-info").mkdir()
    (cwd / "Neuronx.Distributed_Inference-0.6.0.dist-info").mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(
        sys, "path", [str(tmp_path / "missing"), str(first), str(second), "", str(tmp_path / "later")]
    )
    assert installed_versions() == {
        "vllm": "0.12.0",
        "vllm-neuron": "0.2.2+lts",
        "neuronx-distributed-inference": "0.6.0",
        "neuronx-cc": None,
    }
