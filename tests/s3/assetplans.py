"""Plans with assets, built directly from the shared types (what the plan will fill, staging reads)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from neuronserve.types import AssetSpec, LaunchPlan, ModelSpec

from .helpers import make_plan


def local_model(root: Path) -> ModelSpec:
    """A model directory on this host (used in place), so a test stages only its assets."""
    model = root / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text('{"model_type": "llama"}')
    return ModelSpec(source="local", uri=str(model), local_path=str(model), origin="SM_VLLM_MODEL")


def asset_plan(
    root: Path, *assets: AssetSpec, files: dict[str, str] | None = None, model: ModelSpec | None = None
) -> LaunchPlan:
    plan = make_plan(model or local_model(root), work_dir=str(root))
    return dataclasses.replace(plan, assets=tuple(assets), files=dict(files or {}))


def main() -> None:
    """`python -m tests.s3.assetplans ROOT ASSET_JSON`: stage one asset in a process a test can kill."""
    from neuronserve.stage import stage_all

    root, doc = Path(sys.argv[1]), json.loads(sys.argv[2])
    stage_all(asset_plan(root, AssetSpec(**doc)), dict(os.environ))


if __name__ == "__main__":
    main()
