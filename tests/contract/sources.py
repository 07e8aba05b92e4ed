"""Where the contract tier finds the stack it runs, or why it cannot (then the tier is skipped saying so).

- The plugin and NxD Inference sources of each lane: `$NEURONSERVE_REFERENCE_DIR`, else
  `<repo>/../shared/reference`, else the nearest `shared/reference` in a directory above the repository
  (this project's machines hold them there; elsewhere, README "Contract tier" says how to get them: git at
  the commits its README names, or the packages from the Neuron pip repository).
- vLLM's Python code of each lane and the transformers both lanes run with: unpacked by
  scripts/contract-deps under the cache, listed in its manifest.json.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_VAR = "NEURONSERVE_REFERENCE_DIR"
# Read at import: the tests' clean-environment fixture clears NEURONSERVE_* variables later.
REFERENCE_FROM_ENV = os.environ.get(REFERENCE_VAR)
CACHE_FROM_ENV = os.environ.get("NEURONSERVE_CACHE_HOME")
XDG_CACHE = os.environ.get("XDG_CACHE_HOME")


@dataclass(frozen=True)
class LaneStack:
    """One lane's stack: its vLLM, its plugin and its NxD Inference (folders in the reference tree)."""

    lane: str
    vllm: str
    plugin: str
    nxdi: str


LANES = (
    LaneStack("2.27", "0.11.0", "vllm-neuron-0.2.2+lts", "nxdi-0.7.14366"),
    LaneStack("2.28", "0.13.0", "vllm-neuron-0.4.1", "nxdi-2.28.0"),
)
HF_LIBRARIES = ("transformers", "huggingface-hub", "tokenizers")


def reference_dir() -> Path | None:
    if REFERENCE_FROM_ENV:
        return Path(REFERENCE_FROM_ENV)
    sibling = ROOT.parent / "shared" / "reference"
    if sibling.is_dir():
        return sibling
    for parent in ROOT.parents:
        candidate = parent / "shared" / "reference"
        if candidate.is_dir():
            return candidate
    return None


def cache_home() -> Path:
    if CACHE_FROM_ENV:
        return Path(CACHE_FROM_ENV)
    return Path(XDG_CACHE or Path.home() / ".cache") / "neuronserve"


def manifest() -> dict[str, str]:
    path = cache_home() / "contract" / "manifest.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, str) and Path(v).is_dir()}


def python_path(lane: LaneStack, reference: Path, unpacked: dict[str, str]) -> list[str]:
    """The child's PYTHONPATH, first to last: the stubs' sitecustomize, the transformers release, the
    lane's vLLM, the plugin, NxD Inference, then this repository (for tests.contract); the venv's own
    packages come after."""
    return [
        str(Path(__file__).parent / "boot"),
        *(unpacked[name] for name in HF_LIBRARIES),
        unpacked[f"vllm-{lane.vllm}"],
        str(reference / lane.plugin),
        str(reference / lane.nxdi / "src"),
        str(ROOT),
    ]


def missing() -> str | None:
    """Why the tier cannot run here, or None when everything is present."""
    reference = reference_dir()
    if reference is None or not reference.is_dir():
        where = REFERENCE_FROM_ENV or f"{ROOT.parent / 'shared' / 'reference'} or a parent's shared/reference"
        return (
            f"contract tier skipped: no reference sources at {where} (set {REFERENCE_VAR}; README "
            "'Contract tier' says how to get vllm-neuron and NxD Inference)"
        )
    for lane in LANES:
        for folder in (reference / lane.plugin / "vllm_neuron", reference / lane.nxdi / "src"):
            if not folder.is_dir():
                return f"contract tier skipped: {folder} is missing (lane {lane.lane})"
    unpacked = manifest()
    wanted = [*HF_LIBRARIES, *(f"vllm-{lane.vllm}" for lane in LANES)]
    absent = [name for name in wanted if name not in unpacked]
    if absent:
        return (
            f"contract tier skipped: {', '.join(absent)} not unpacked under {cache_home() / 'contract'} "
            "(run scripts/contract-deps; it needs PyPI once)"
        )
    return None
