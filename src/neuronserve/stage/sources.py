"""Model sources: make `plan.model.local_path` hold the model, whatever the source kind.

sagemaker/local directories are used in place (checked, never copied); an s3:// prefix is copied;
a model.tar.gz (local or s3://) is downloaded and extracted; a hub id is left to the engine, which
reads HF_TOKEN from the environment it inherits (documented in docs/PERFORMANCE.md and the README).
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable
from typing import Any

from neuronserve.errors import StageError
from neuronserve.stage import atomic, fresh
from neuronserve.stage.archive import extract_tar, remove_tree
from neuronserve.stage.client import translate
from neuronserve.stage.manifest import FileEntry, Manifest, local_complete
from neuronserve.stage.paths import S3Uri, parse_s3_uri
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.s5 import fetch_objects, list_with_s5cmd, start_early_copy
from neuronserve.stage.s5proc import S5Run
from neuronserve.stage.transfer import RemoteObject, TransferOptions, list_prefix
from neuronserve.types import ModelSpec, Progress

log = logging.getLogger("neuronserve.stage")
ClientFactory = Callable[[], Any]
ProgressCb = Callable[[Progress], None] | None


def stage_prefix(  # noqa: PLR0917
    make_client: ClientFactory,
    src: S3Uri,
    dest: str,
    opts: TransferOptions,
    progress: ProgressCb,
    what: str,
    *,
    check_fresh: bool = False,
) -> Manifest:
    """Copy every object under `src` to `dest` (atomically, resumably).

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
        listing = fresh.list_for_check(make_client, src, opts, what, dest)
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
            staging = atomic.staging_path(dest)
            fresh.seed_staging(dest, staging, done, listing, src.uri)
            return _fetch_and_commit(make_client, src, dest, staging, listing, opts, progress, what, None)
        if done is not None:
            return done
        return copy_prefix_locked(make_client, src, dest, opts, progress, what)


def copy_prefix_locked(  # noqa: PLR0917
    make_client: ClientFactory, src: S3Uri, dest: str, opts: TransferOptions, progress: ProgressCb, what: str
) -> Manifest:
    """The copy itself; the caller holds `dir_lock(dest)`.

    A fresh copy starts transferring while the prefix is listed (`start_early_copy`); whatever
    goes wrong before the listing has been checked stops that copy and removes what it wrote.
    """
    staging = atomic.staging_path(dest)
    early = start_early_copy(opts.environ, src, staging, opts)
    try:
        objects = list_with_s5cmd(opts, src) or list_prefix(make_client(), src)
        os.makedirs(staging, exist_ok=True)
        total = sum(o.size for o in objects)
        atomic.check_free_space(staging, total - _bytes_present(staging, objects), src.uri)
    except BaseException:
        if early is not None:
            early.abandon(staging, keep_dir=False)
        raise
    log.info("%s: %d files, %.1f MiB from %s to %s", what, len(objects), total / 2**20, src.uri, dest)
    return _fetch_and_commit(make_client, src, dest, staging, objects, opts, progress, what, early)


def _fetch_and_commit(  # noqa: PLR0917
    make_client: ClientFactory,
    src: S3Uri,
    dest: str,
    staging: str,
    objects: list[RemoteObject],
    opts: TransferOptions,
    progress: ProgressCb,
    what: str,
    early: S5Run | None,
) -> Manifest:
    """Fetch what the staging journal lacks, drop what the listing lacks, commit with the new manifest."""
    total = sum(o.size for o in objects)
    try:
        with ProgressMeter(what, total, progress) as meter:
            fetched = fetch_objects(
                make_client, src.bucket, objects, staging, opts, meter, whole_prefix=True, early=early
            )
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


def stage_archive(  # noqa: PLR0917
    make_client: ClientFactory,
    uri: str,
    dest: str,
    opts: TransferOptions,
    progress: ProgressCb,
    label: str = "model",
) -> Manifest:
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
            archive = _download_archive(make_client(), parse_s3_uri(uri), download_dir, opts, progress, label)
        else:
            archive = uri
        staging = atomic.staging_path(dest)
        remove_tree(staging)  # extraction is cheap to redo and not resumable
        os.makedirs(staging)
        atomic.check_free_space(staging, os.path.getsize(archive), uri)
        log.info("extracting %s to %s", uri, dest)
        try:
            with ProgressMeter(f"extract {uri}", None, progress) as meter:
                files = extract_tar(archive, staging, uri, meter, environ=opts.environ)
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


def _download_archive(  # noqa: PLR0917
    client: Any, src: S3Uri, download_dir: str, opts: TransferOptions, progress: ProgressCb, label: str
) -> str:
    try:
        head = client.head_object(Bucket=src.bucket, Key=src.key)
    except Exception as err:
        raise translate(err, src.uri) from err
    name = posixpath.basename(src.key) or "model.tar.gz"
    obj = RemoteObject(src.key, name, int(head["ContentLength"]), str(head["ETag"]).strip('"'))
    os.makedirs(download_dir, exist_ok=True)
    atomic.check_free_space(download_dir, obj.size, src.uri)
    with ProgressMeter(f"{label} {src.uri}", obj.size, progress) as meter:
        fetch_objects(lambda: client, src.bucket, [obj], download_dir, opts, meter)
    return os.path.join(download_dir, name)


def stage_model(
    spec: ModelSpec, make_client: ClientFactory, opts: TransferOptions, progress: ProgressCb
) -> str | None:
    """Return the directory the engine reads (None for a hub id left to the engine)."""
    if spec.source == "hub":
        if spec.local_path is None:  # with a local path, the plan stages it (stage/assets.py, hub.py)
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
        stage_prefix(
            make_client,
            parse_s3_uri(spec.uri),
            spec.local_path,
            opts,
            progress,
            f"model {spec.uri}",
            check_fresh=True,
        )
    elif spec.source == "archive":
        stage_archive(make_client, spec.uri, spec.local_path, opts, progress)
    else:
        raise StageError(f"unknown model source {spec.source!r} for {spec.uri}")
    return spec.local_path
