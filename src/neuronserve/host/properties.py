"""LMI's serving.properties: the `key=value` settings file a model directory may carry, read from
SM_MODEL_DIR and from the directory of the model being served (SM_VLLM_MODEL, OPTION_MODEL_ID or
HF_MODEL_ID pointing at a local LMI model directory: its n_positions was silently dropped)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from neuronserve.config.origin import Setting
from neuronserve.errors import ConfigError


def read_serving_properties(model_dir: str) -> dict[str, str]:
    """LMI's serving.properties (`key=value` lines) in the model directory, if there is one."""
    out: dict[str, str] = {}
    path = os.path.join(model_dir, "serving.properties")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return out
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path} is not UTF-8 text ({err}): write it as key=value lines", ()) from None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "!")):
            continue
        key, sep, value = stripped.partition("=")
        if not sep or not key.strip():
            # silently skipping it would drop a setting the user believes is applied
            raise ConfigError(
                f"{path} line {number}: {stripped[:80]!r} is not key=value "
                "(e.g. option.tensor_parallel_degree=2)",
                (),
            )
        out[key.strip()] = value.strip()
    return out


FILE = "serving.properties"


def holds_model(model_dir: str) -> bool:
    """Whether a directory holds anything but its serving.properties: LMI's way is a model directory with
    only that file, whose `option.model_id` names the model (a hub id, an s3:// prefix or a local
    directory), so such a directory is configuration, not the model."""
    try:
        return any(entry.name != FILE for entry in os.scandir(model_dir))
    except OSError:
        return False


def served_model_dir(models: Sequence[Setting], sm_model_dir: str) -> str | None:
    """The local directory of the model the plan will serve when it is not SM_MODEL_DIR, in
    plan/model.py choose_model's order (`-- --model` and SM_VLLM_MODEL, then SM_MODEL_DIR when it holds a
    model, then HF_MODEL_ID and OPTION_MODEL_ID); None when that model is SM_MODEL_DIR or not local."""
    first = [m for m in models if m.origin == "-- --model" or m.origin.upper() == "SM_VLLM_MODEL"]
    if not first and holds_model(sm_model_dir):
        return None
    ordered = first + [m for m in models if m not in first]
    if not ordered:
        return None
    path = str(ordered[0].value)
    if path.startswith("s3://") or not os.path.isdir(path):
        return None
    if os.path.realpath(path) == os.path.realpath(sm_model_dir):
        return None
    return path


def merge(
    deployment: Mapping[str, str], model: Mapping[str, str], model_dir: str, sm_model_dir: str
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """Both serving.properties files as one: (values, key -> the file it came from, warnings).

    The file in the served model's directory wins a key both set: it describes the model being served
    (its n_positions, its tensor_parallel_degree), while SM_MODEL_DIR's then belongs to a directory
    whose model is not served. Each key it overrides with another value is said in a warning, naming
    both files, so the choice is in the plan and the log."""
    own = os.path.join(model_dir, FILE)
    values = {**deployment, **model}
    labels = {key: own for key in model}
    warnings = [
        f"{own} {key}={model[key]} overrides {os.path.join(sm_model_dir, FILE)} {key}={deployment[key]} "
        "(the file beside the served model wins)"
        for key in sorted(model)
        if key in deployment and deployment[key].strip() != model[key].strip()
    ]
    return values, labels, warnings
