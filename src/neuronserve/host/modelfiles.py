"""A local model directory's facts: config.json (parsed, and its digest), the safetensors headers
(lm_head present, parameter count), and a digest of the weights for the compile cache key. Only
headers and sampled blocks are read, never whole weight files.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.facts import ModelFacts


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
    else:
        digest = _adapter_config_digest(path)
    return ModelFacts(
        "dir",
        config,
        digest,
        _lm_head_in_weights(path),
        safetensors_params(path),
        weights_digest=weights_digest(path),
    )


def _adapter_config_digest(path: str) -> str | None:
    """A LoRA adapter directory has adapter_config.json (rank, alpha, target modules) where a model has
    config.json: its digest stands in for the config digest, so the compile cache key (plan/assets/kinds.py
    `identity`) changes when an adapter at the same local path is replaced, even when its weight files
    keep their names and sizes. Not parsed: the plan reads nothing from it."""
    try:
        with open(os.path.join(path, "adapter_config.json"), "rb") as f:
            return "adapter:" + hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


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
