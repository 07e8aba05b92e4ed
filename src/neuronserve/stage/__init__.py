"""Staging: make the plan's local paths exist (model, compiled artifacts) and publish artifacts after READY.

Placeholder until the staging issue lands: local sources pass through, remote ones are refused.
The two functions below are the contract the serve command calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from neuronserve.errors import StageError
from neuronserve.types import LaunchPlan, Progress, StageResult

ProgressCallback = Callable[[Progress], None]


def stage_all(
    plan: LaunchPlan, environ: Mapping[str, str], progress: ProgressCallback | None = None
) -> StageResult:
    """Fetch what the plan needs; blocking; raises StageError with the URI and the likely fix."""
    if plan.model.source in ("s3", "archive"):
        raise StageError(f"staging {plan.model.uri} is not implemented yet")
    model_dir = plan.model.local_path
    return StageResult(model_dir=model_dir, artifacts_dir=plan.artifacts.local_dir, cache="off")


def publish_artifacts(plan: LaunchPlan, result: StageResult, environ: Mapping[str, str]) -> None:
    """After READY on a cache miss: upload the compiled artifacts under the plan's key (no-op here)."""
    return None
