"""Staging: make the plan's local paths exist (model, compiled artifacts) and publish artifacts after READY.

The two functions below are the contract the serve command calls: `stage_all` before the engine
starts (blocking, in a worker thread, progress fed to /ping) and `publish_artifacts` in the
background once the engine is READY. Modules: `context` (what a run hands down: StageContext, Batch),
`paths` (key -> path, safety), `client` (S3 client, error translation), `transfer` (what both download
engines share: objects, options, listing, journal), `s3engine` (which engine: s5cmd or Python),
`rangedget` (the Python engine), `s5cmdcopy` + `s5cmdproc` (the s5cmd engine and its process),
`fresh` (is a complete copy still what S3 holds), `manifest`, `atomic` (temp dir + rename), `archive` +
`tarread` (safe tar, our own bounded reader), `sources` (model kinds), `assets` (everything else the
engine reads, and the plan's files; `hub` + `hubfetch` download a hub repo), `cache` (compile cache),
`upload` (write-back), `progress` (log lines, bar, callback), `events` (cache events for metrics).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from neuronserve.errors import ConfigError, StageError
from neuronserve.stage import events
from neuronserve.types import LaunchPlan, Progress, StageResult

if TYPE_CHECKING:
    from neuronserve.stage.manifest import Manifest

ProgressCallback = Callable[[Progress], None]
log = logging.getLogger("neuronserve.stage")


def stage_all(
    plan: LaunchPlan, environ: Mapping[str, str], progress: ProgressCallback | None = None
) -> StageResult:
    """Fetch what the plan needs; blocking; raises StageError with the URI and the likely fix.

    `environ` is read once, through the rows, into the run's context (stage/context.py): the staging
    options were already checked with the settings (config/stage.py), so a bad one never gets here."""
    from neuronserve.stage.cache import stage_artifacts  # noqa: PLC0415
    from neuronserve.stage.context import StageContext  # noqa: PLC0415
    from neuronserve.stage.sources import stage_model  # noqa: PLC0415

    ctx = StageContext.from_environ(environ, progress)
    if plan.artifacts.require_hit:  # fail before the model download, not after it
        artifacts_dir, cache = stage_artifacts(plan.artifacts, ctx)
        model_dir = stage_model(plan.model, ctx)
    else:
        model_dir = stage_model(plan.model, ctx)
        artifacts_dir, cache = stage_artifacts(plan.artifacts, ctx)
    if plan.assets or plan.files:  # adapters, a draft, checkpoints, a template; then the plan's files
        from neuronserve.stage.assets import stage_assets  # noqa: PLC0415

        stage_assets(plan, ctx)
    if model_dir:
        check_model_config(model_dir, plan.model.uri)
    return StageResult(model_dir=model_dir, artifacts_dir=artifacts_dir, cache=cache)


def check_model_config(model_dir: str, uri: str) -> None:
    """A staged config.json must be JSON: the engine would otherwise fail minutes into loading."""
    import json  # noqa: PLC0415

    path = os.path.join(model_dir, "config.json")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return  # no config.json (a GGUF file, a hub id): the engine decides
    try:
        json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise StageError(
            f"{path} (from {uri}) is not valid JSON ({err}): the model at {uri} is damaged or incomplete; "
            "upload its config.json again"
        ) from None


def publish_artifacts(plan: LaunchPlan, result: StageResult, environ: Mapping[str, str]) -> None:
    """After READY on a cache miss: upload the compiled artifacts under the plan's key.

    Without a remote cache, neuronserve's own local directory is marked complete instead, so the
    next start on this host (a persistent work dir) reuses it. Otherwise a no-op unless the
    artifacts are keyed or explicit, the stage was a miss and the cache is writable. Runs in the
    background of a serving endpoint, so failures are logged, never raised: a cache that cannot
    be written must not take the model down (`neuronserve compile` calls `publish_compiled`, which
    raises: there the push is the job).
    """
    spec = plan.artifacts
    if spec.mode == "local" and spec.owned and result.cache == "miss" and result.artifacts_dir:
        from neuronserve.stage.upload import mark_compiled  # noqa: PLC0415

        mark_compiled(result.artifacts_dir)
        return
    try:
        published = publish_compiled(plan, result, environ)
    except (StageError, ConfigError) as err:
        events.emit("publish_failed")
        log.warning("compile cache write-back failed (the server keeps running): %s", err)
        return
    if published is not None:
        events.emit("publish_ok")


def publish_compiled(plan: LaunchPlan, result: StageResult, environ: Mapping[str, str]) -> Manifest | None:
    """Upload a miss's compiled artifacts under the plan's remote entry, the manifest last (the entry
    exists only once complete, stage/upload.py); the manifest, or None when there is nothing to write
    back (no remote cache, read-only, not a miss, or nothing compiled). Raises StageError."""
    spec = plan.artifacts
    if spec.mode not in ("keyed", "explicit") or result.cache != "miss" or spec.read_only:
        return None
    if not spec.remote_uri or not result.artifacts_dir:
        return None
    from neuronserve.stage.atomic import list_files  # noqa: PLC0415
    from neuronserve.stage.context import StageContext  # noqa: PLC0415
    from neuronserve.stage.paths import parse_s3_uri  # noqa: PLC0415
    from neuronserve.stage.upload import mark_local, publish_dir  # noqa: PLC0415

    if not list_files(result.artifacts_dir):
        log.info("nothing compiled into %s: no write-back to %s", result.artifacts_dir, spec.remote_uri)
        return None
    ctx = StageContext.from_environ(environ)
    remote = parse_s3_uri(spec.remote_uri)
    manifest = publish_dir(ctx.client(), result.artifacts_dir, remote, ctx.transfer)
    mark_local(result.artifacts_dir, manifest)
    return manifest
