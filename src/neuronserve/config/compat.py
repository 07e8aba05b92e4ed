"""Names users bring from other containers: DJL LMI (`OPTION_*`, serving.properties) and TGI/HF.

Kept apart from the SM_VLLM_* mapping because these names carry their own value conventions
(`bf16`, `max`, booleans as strings) that are normalised here before the conflict checks compare them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from neuronserve.config.table import LMI_VARS, TGI_VARS, Var
from neuronserve.errors import ConfigError

_LMI_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def typed_value(var: Var, raw: str) -> bool | str:
    """The value normalised for the conflict checks; a count must be decimal digits (isdecimal: isdigit
    accepts "²", which was accepted here and crashed int() later in the plan)."""
    text = raw.strip()
    if var.kind == "bool":
        if text.lower() not in ("true", "false", ""):
            raise ConfigError(f"{var.name}={raw!r} is not a boolean: use true or false", (var.name,))
        return text.lower() != "false"
    if var.kind == "dtype":
        return _LMI_DTYPES.get(text.lower(), text)
    if var.kind in ("int", "tp"):
        if not text.isdecimal() and not (var.kind == "tp" and text.lower() == "max"):
            hint = "a positive integer" + (" or max" if var.kind == "tp" else "")
            raise ConfigError(f"{var.name}={raw!r} is not {hint}", (var.name,))
        return text.lower()
    return text


def compat_sources(
    environ: Mapping[str, str], props: Mapping[str, str], warnings: list[str]
) -> list[tuple[str, Any, str]]:
    """(setting, value, origin) from LMI (serving.properties, then OPTION_*) and TGI/HF names, in that order.

    Model ids come as setting "<model>" (in source order); unknown OPTION_* keys become one warning.
    An empty model id or compiled-graph path is unset, as an empty SM_VLLM_MODEL or
    NEURON_COMPILED_ARTIFACTS is (an empty path was a local artifacts directory "").
    """
    out: list[tuple[str, Any, str]] = []
    lmi: list[tuple[str, str, str]] = []  # (canonical OPTION_ name, shown origin, raw value)
    for key in sorted(props):
        if key.startswith("option."):
            lmi.append(("OPTION_" + key[7:].upper(), f"serving.properties {key}", props[key]))
    for key in sorted(environ):
        if key.startswith("OPTION_"):
            lmi.append((key, key, environ[key]))
    for name in LMI_VARS:  # LMI names without the OPTION_ prefix (TENSOR_PARALLEL_DEGREE, HF_REVISION)
        if not name.startswith("OPTION_") and name in environ:
            lmi.append((name, name, environ[name]))
    unknown = []
    for name, origin, raw in lmi:
        var = LMI_VARS.get(name)
        if var is not None and var.key in ("<model>", "<artifacts>") and not raw.strip():
            continue
        if name == "OPTION_MODEL_ID":
            out.append(("<model>", raw.strip(), origin))
        elif var is None:
            unknown.append(origin)
        elif var.key == "<artifacts>":
            out.append(("artifacts", raw.strip(), origin))
        elif var.key:
            out.append((var.key, typed_value(var, raw), origin))
    if unknown:
        warnings.append(f"ignored unknown LMI settings (no vLLM-on-Neuron equivalent): {', '.join(unknown)}")
    for name, var in TGI_VARS.items():
        if name in environ and var.key != "<model>":
            out.append((var.key, typed_value(var, environ[name]), name))
    return out
