"""Model directories and host facts on real files, for the tests of host/ (the readers they check)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from neuronserve.host.facts import gather
from neuronserve.plan.facts import HostFacts

# The smallest config a plan reads as a Llama with a 1,024-token context.
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 1024}


def write_model(path: Path, config: dict[str, object], weights: dict[str, str] | None = None) -> Path:
    """A model directory: config.json and, when `weights` is given, a safetensors index with that map."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    if weights is not None:
        (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weights}))
    return path


def noise(n: int, seed: str = "") -> bytes:
    """n deterministic bytes that differ at every offset (so every sampled block counts)."""
    blocks = (hashlib.sha256(f"{seed}{i}".encode()).digest() for i in range(n // 32 + 1))
    return b"".join(blocks)[:n]


def write_safetensors(path: Path, tensors: dict[str, list[int]], data: bytes = b"") -> Path:
    """A safetensors file as the format has it: 8-byte little-endian header length, JSON header (with
    __metadata__), then the tensor bytes (BF16: two per element, or `data` when given)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in tensors.items():
        size = 2
        for n in shape:
            size *= n
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + (data or noise(offset, path.name)))
    return path


def gathered(tmp_path: Path, env: dict[str, str] | None = None) -> HostFacts:
    """gather() with no SageMaker model directory (one under tmp_path that does not exist)."""
    return gather({"SM_MODEL_DIR": str(tmp_path / "no-model"), **(env or {})})
