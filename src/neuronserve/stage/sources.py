"""Model sources: make `plan.model.local_path` hold the model, whatever the source kind.

sagemaker/local directories are used in place (checked, never copied); an s3:// prefix is copied;
a model.tar.gz (local or s3://) is downloaded and extracted; a hub id is left to the engine, which
reads HF_TOKEN from the environment it inherits (documented in docs/PERFORMANCE.md and the README).
"""

from __future__ import annotations

import logging
import os
import posixpath

from neuronserve.errors import StageError
from neuronserve.stage import atomic, fresh, hubprobe
from neuronserve.stage.archive import extract_tar, remove_tree
from neuronserve.stage.client import translate
from neuronserve.stage.context import Batch, StageContext
from neuronserve.stage.manifest import FileEntry, Manifest, local_complete
from neuronserve.stage.paths import S3Uri, parse_s3_uri
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.s3engine import fetch_objects, list_with_s5cmd, start_early_copy
from neuronserve.stage.s5cmdproc import S5Run
from neuronserve.stage.transfer import RemoteObject, list_prefix
from neuronserve.types import ModelSpec

log = logging.getLogger("neuronserve.stage")


def stage_prefix(
    ctx: StageContext, src: S3Uri, dest: str, what: str, *, check_fresh: bool = False
) -> Manifest:
    """Copy every object under `src` to `dest` (atomically, resumably); `what` names it in logs.

    A complete copy costs no request, unless `check_fresh` (models): then one listing is compared,
    by key, size and ETag, against the manifest, and only what changed in S3 is fetched (fresh.py).
    Artifacts under a cache key never change in place, so they skip the check.
    """
    src = src.as_prefix()
    done = local_complete(dest, src.uri)
    listing = None
    if done is not None:
        if not check_fresh:
            log.info("%s: complete copy at %s (manifest present), nothing to download", what, dest)
            return done
        listing = fresh.list_for_check(ctx, src, what, dest)
        if listing is None or not fresh.changes(done, listing):
            return done
    with atomic.dir_lock(dest):
        done = local_complete(dest, src.uri)
        if done is not None and listing is not None and fresh.changes(done, listing):
            log.warning(
                "%s: %s changed in place since the local copy (%s): fetching the changes. The compile "
                "cache key of an s3:// model names its URI, not its bytes: a cached compile of the old "
                "weights would be reused; give each model version its own prefix",
                what,
                src.uri,
                fresh.describe(done, listing),
            )
            fresh.seed_staging(dest, atomic.staging_path(dest), done, listing, src.uri)
            return _fetch_and_commit(ctx, src, dest, listing, what=what, early=None)
        if done is not None:
            return done
        return copy_prefix_locked(ctx, src, dest, what)


def copy_prefix_locked(ctx: StageContext, src: S3Uri, dest: str, what: str) -> Manifest:
    """The copy itself; the caller holds `dir_lock(dest)`.

    A fresh copy starts transferring while the prefix is listed (`start_early_copy`); whatever
    goes wrong before the listing has been checked stops that copy and removes what it wrote.
    """
    staging = atomic.staging_path(dest)
    early = start_early_copy(ctx, src, staging)
    try:
        objects = list_with_s5cmd(ctx, src) or list_prefix(ctx.client(), src)
        os.makedirs(staging, exist_ok=True)
        total = sum(o.size for o in objects)
        atomic.check_free_space(staging, total - _bytes_present(staging, objects), src.uri)
    except BaseException:
        if early is not None:
            early.abandon(staging, keep_dir=False)
        raise
    log.info("%s: %d files, %.1f MiB from %s to %s", what, len(objects), total / 2**20, src.uri, dest)
    return _fetch_and_commit(ctx, src, dest, objects, what=what, early=early)


def _fetch_and_commit(
    ctx: StageContext, src: S3Uri, dest: str, objects: list[RemoteObject], *, what: str, early: S5Run | None
) -> Manifest:
    """Fetch what the staging journal lacks, drop what the listing lacks, commit with the new manifest."""
    staging = atomic.staging_path(dest)
    total = sum(o.size for o in objects)
    try:
        with ProgressMeter(what, total, ctx.progress) as meter:
            batch = Batch(src.bucket, objects, staging, meter, whole_prefix=True, early=early)
            fetched = fetch_objects(ctx, batch)
    finally:
        if early is not None:
            early.kill()  # a no-op once it finished; never left writing after an error
    resumed = len(objects) - fetched
    log.info(
        "%s: fetched %d of %d files%s",
        what,
        fetched,
        len(objects),
        f" ({resumed} already complete locally)" if resumed else "",
    )
    atomic.prune(staging, {o.rel for o in objects})
    files = tuple(FileEntry(o.rel, o.size, o.etag, o.key) for o in objects)
    manifest = Manifest(source=src.uri, files=files)
    atomic.commit(staging, dest, manifest)
    return manifest


def _bytes_present(staging: str, objects: list[RemoteObject]) -> int:
    n = 0
    for o in objects:
        try:
            if os.path.getsize(os.path.join(staging, o.rel)) == o.size:
                n += o.size
        except OSError:
            pass
    return n


def stage_archive(ctx: StageContext, uri: str, dest: str, label: str = "model") -> Manifest:
    """Download (if s3://) and safely extract a .tar.gz into `dest`; the manifest names the archive.

    `label` names what it holds in logs and progress lines ("model", "LoRA adapter 'sql'", ...).
    """
    stamp = _local_stamp(uri) if not uri.startswith("s3://") else ""
    source = uri if not stamp else f"{uri}#{stamp}"
    done = local_complete(dest, source)
    if done is not None:
        log.info("%s archive %s: already extracted at %s", label, uri, dest)
        return done
    with atomic.dir_lock(dest):
        done = local_complete(dest, source)
        if done is not None:
            return done
        download_dir = dest.rstrip("/") + ".download"
        if uri.startswith("s3://"):
            archive = _download_archive(ctx, parse_s3_uri(uri), download_dir, label)
        else:
            archive = uri
        staging = atomic.staging_path(dest)
        remove_tree(staging)  # extraction is cheap to redo and not resumable
        os.makedirs(staging)
        atomic.check_free_space(staging, os.path.getsize(archive), uri)
        log.info("extracting %s to %s", uri, dest)
        try:
            with ProgressMeter(f"extract {uri}", None, ctx.progress) as meter:
                files = extract_tar(archive, staging, uri, meter, limits=ctx.archive)
        except OSError as err:
            raise translate(err, uri) from err
        atomic.commit(staging, dest, Manifest(source=source, files=tuple(files)))
        remove_tree(download_dir)
        return Manifest(source=source, files=tuple(files))


def _local_stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError as err:
        raise StageError(f"model archive {path} not found: check the path ({err.strerror})") from err
    return f"{st.st_size}-{st.st_mtime_ns}"


def _download_archive(ctx: StageContext, src: S3Uri, download_dir: str, label: str) -> str:
    client = ctx.client()
    try:
        head = client.head_object(Bucket=src.bucket, Key=src.key)
    except Exception as err:
        raise translate(err, src.uri) from err
    name = posixpath.basename(src.key) or "model.tar.gz"
    obj = RemoteObject(src.key, name, int(head["ContentLength"]), str(head["ETag"]).strip('"'))
    os.makedirs(download_dir, exist_ok=True)
    atomic.check_free_space(download_dir, obj.size, src.uri)
    with ProgressMeter(f"{label} {src.uri}", obj.size, ctx.progress) as meter:
        fetch_objects(ctx, Batch(src.bucket, [obj], download_dir, meter))
    return os.path.join(download_dir, name)


def stage_model(spec: ModelSpec, ctx: StageContext) -> str | None:
    """Return the directory the engine reads (None for a hub id left to the engine)."""
    if spec.source == "hub":
        if spec.local_path is None:  # with a local path, the plan stages it (stage/assets.py, hub.py)
            problem = hubprobe.probe(spec.uri, spec.revision, spec.origin, ctx.hub.engine_env)
            if problem:  # said now, not in the engine's traceback after it started
                raise StageError(problem)
            log.info(
                "model %s: a hub id, downloaded by the engine itself (HF_TOKEN is passed through)", spec.uri
            )
        return spec.local_path
    if spec.source in ("sagemaker", "local"):
        path = spec.local_path or spec.uri
        if not os.path.isdir(path):
            via = f" (set by {spec.origin})" if spec.origin else ""
            raise StageError(f"model directory {path}{via} does not exist: mount it or fix the path")
        return path
    if not spec.local_path:
        raise StageError(f"no local path planned for model {spec.uri}")
    if spec.source == "s3":
        stage_prefix(ctx, parse_s3_uri(spec.uri), spec.local_path, f"model {spec.uri}", check_fresh=True)
    elif spec.source == "archive":
        stage_archive(ctx, spec.uri, spec.local_path)
    else:
        raise StageError(f"unknown model source {spec.source!r} for {spec.uri}")
    return spec.local_path
