"""Plans built directly from the shared types (the stage API reads nothing else) and data helpers."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from neuronserve.types import ArtifactSpec, LaunchPlan, ModelSpec


def make_plan(
    model: ModelSpec, artifacts: ArtifactSpec | None = None, work_dir: str = "/tmp/x"
) -> LaunchPlan:
    return LaunchPlan(
        device="neuron",
        argv=("python", "-m", "vllm.entrypoints.openai.api_server"),
        env={},
        model=model,
        neuron_override=None,
        cache_key="k1",
        warnings=(),
        artifacts=artifacts or ArtifactSpec(),
        work_dir=work_dir,
    )


def s3_model(uri: str, dest: str) -> LaunchPlan:
    return make_plan(ModelSpec(source="s3", uri=uri, local_path=dest, origin="SM_VLLM_MODEL"))


def put_tree(s3: Any, bucket: str, prefix: str, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        s3.put_object(Bucket=bucket, Key=prefix + rel, Body=data)


def sample_files(seed: int = 0) -> dict[str, bytes]:
    """Mixed sizes: tiny config files, an empty file, a multi-part weight file (parts are 1 MiB in tests)."""
    rnd = hashlib.sha256(str(seed).encode()).digest()
    return {
        "config.json": b'{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}',
        "tokenizer/tokenizer.json": b"{}" * 100,
        "empty.txt": b"",
        "model-00001.safetensors": (rnd * (3 * 1024 * 1024 // 32 + 7))[: 3 * 1024 * 1024 + 123],
        "model-00002.safetensors": os.urandom(600_000),
    }


def read_tree(root: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = fh.read()
    return out
