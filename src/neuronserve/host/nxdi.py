"""The installed NxD Inference's model registry, read from its files without importing it.

vllm-neuron resolves a model class as `MODEL_TYPES[model][task]` from NxD Inference's
`utils/constants.py` (vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:641-666), and the
registry differs by release: 0.7.14366 (SDK 2.27.0) has no `pixtral`, 2.28.0 adds it with `qwen2_vl` and
`qwen3_vl`, and the 0.7.15063 of SDK 2.27.1 images is not public. So the plan is given the registry the
image really has. Importing NxD Inference would pull torch, torch_neuronx and the compiler (seconds, and
a device check); instead the package is located on sys.path (`importlib.util.find_spec` of the
top-level name, which imports nothing) and `MODEL_TYPES = {...}` is read from the syntax tree of its
`utils/constants.py`: its keys are model types, each value's keys the tasks it builds.
"""

from __future__ import annotations

import ast
import importlib.util
import os

PACKAGE = "neuronx_distributed_inference"
CONSTANTS = os.path.join("utils", "constants.py")
NAME = "MODEL_TYPES"


def installed_model_types() -> dict[str, tuple[str, ...]] | None:
    """model type -> tasks of the installed NxD Inference; None when it is not installed or its registry
    cannot be read (the plan then says which registry it assumed)."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        found = read_model_types(os.path.join(base, CONSTANTS))
        if found is not None:
            return found
    return None


def read_model_types(path: str) -> dict[str, tuple[str, ...]] | None:
    """MODEL_TYPES of one constants.py: the top-level assignment of a dict literal whose keys are
    strings; entries that are not a string key with a dict of string keys are left out. None when the
    file cannot be read or parsed, or holds no such assignment."""
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), filename=path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            names, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == NAME for t in names) and isinstance(value, ast.Dict):
            return _registry(value)
    return None


def _registry(node: ast.Dict) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Dict)):
            continue
        tasks = [t.value for t in value.keys if isinstance(t, ast.Constant) and isinstance(t.value, str)]
        out[key.value] = tuple(tasks)
    return out
