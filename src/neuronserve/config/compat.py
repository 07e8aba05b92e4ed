"""Names users bring from other containers: DJL LMI (`OPTION_*`, serving.properties) and TGI/HF.

Kept apart from the SM_VLLM_* mapping because these names carry their own value conventions
(`bf16`, `max`, booleans as strings): each row's parser (config/values.py `lmi_*`) normalises them
before the conflict checks compare them with the same setting from another source.

The TGI names are those Hugging Face's TGI Neuron image reads (optimum-neuron,
text-generation-inference/tgi_env.py: `tgi_server_env_vars` HF_BATCH_SIZE, HF_SEQUENCE_LENGTH,
HF_NUM_CORES, HF_AUTO_CAST_TYPE, each paired with the router's MAX_BATCH_SIZE / MAX_TOTAL_TOKENS; and
server/text_generation_server/model.py `get_export_kwargs_from_env`, which compiles with
batch_size=int(HF_BATCH_SIZE) and sequence_length=int(HF_SEQUENCE_LENGTH)): so HF_BATCH_SIZE is the
compiled batch (max_num_seqs) and HF_SEQUENCE_LENGTH the compiled length (max_model_len). TGI's
SageMaker entrypoint passes HF_MODEL_QUANTIZE on as QUANTIZE, the launcher's `--quantize`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from neuronserve.config.table import LMI_VARS, TGI_VARS
from neuronserve.config.typos import check_option

_PATHS = {"<model>": "<model>", "<artifacts>": "artifacts"}  # row key -> the setting parse_settings reads


def property_origin(key: str, files: Mapping[str, str] | None) -> str:
    """How a serving.properties key is named in messages: `serving.properties option.x` for SM_MODEL_DIR's
    file, the file's path for another (the model directory's: launchplan.read_settings)."""
    return f"{(files or {}).get(key, 'serving.properties')} {key}"


def _lmi_entries(
    environ: Mapping[str, str], props: Mapping[str, str], files: Mapping[str, str] | None
) -> list[tuple[str, str, str]]:
    """(canonical OPTION_ name, shown origin, raw value): serving.properties first, then the env."""
    lmi: list[tuple[str, str, str]] = []
    for key in sorted(props):
        if key.startswith("option."):
            lmi.append(("OPTION_" + key[7:].upper(), property_origin(key, files), props[key]))
    for key in sorted(environ):
        if key.startswith("OPTION_"):
            lmi.append((key, key, environ[key]))
    for name in LMI_VARS:  # LMI names without the OPTION_ prefix (TENSOR_PARALLEL_DEGREE, HF_REVISION)
        if not name.startswith("OPTION_") and name in environ:
            lmi.append((name, name, environ[name]))
    return lmi


def compat_sources(
    environ: Mapping[str, str],
    props: Mapping[str, str],
    warnings: list[str],
    files: Mapping[str, str] | None = None,
) -> list[tuple[str, Any, str]]:
    """(setting, value, origin) from LMI (serving.properties, then OPTION_*) and TGI/HF names, in that order.

    Model ids come as setting "<model>" (in source order); unknown OPTION_* keys become one warning.
    An empty model id or compiled-graph path is unset, as an empty SM_VLLM_MODEL or
    NEURON_COMPILED_ARTIFACTS is (an empty path was a local artifacts directory "").
    """
    out: list[tuple[str, Any, str]] = []
    unknown = []
    for name, origin, raw in _lmi_entries(environ, props, files):
        var = LMI_VARS.get(name)
        if var is None:
            check_option(name, origin)  # a near miss of a mapped option is refused, not warned
            unknown.append(origin)
        elif var.key in _PATHS:
            if raw.strip():  # empty is unset
                out.append((_PATHS[var.key], raw.strip(), origin))
        elif var.key:
            out.append((var.key, var.parse(var, raw), origin))
    if unknown:
        warnings.append(f"ignored unknown LMI settings (no vLLM-on-Neuron equivalent): {', '.join(unknown)}")
    for name, var in TGI_VARS.items():
        if name in environ and var.key != "<model>":
            out.append((var.key, var.parse(var, environ[name]), name))
    return out
