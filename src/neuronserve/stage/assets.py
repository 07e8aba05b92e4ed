"""Everything else the engine reads from disk, staged by the model's own stager: `plan.assets`.

LoRA adapters, an EAGLE draft, NxD Inference quantized checkpoints and a chat template are named by
the user as s3:// URIs, local paths, .tar.gz archives or hub ids; the plan decides the `local` path
the engine reads (pure), and this module makes it exist, with exactly the machinery the model uses,
so each asset gets the same guarantees: a manifest written last marks a complete copy, a killed copy
resumes file by file, every key and archive member passes `safe_relpath`, and the final path appears
at once (atomic rename). Then `plan.files` (text the plan decided in full, such as the plugin's
lora_ckpt_json, which names the staged paths) is written, once the paths it names exist.

The model itself keeps its own path (`sources.stage_model`); its entry in `plan.assets` is staged
here only when it is a hub download, which stage_model leaves to the engine.
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
from collections.abc import Mapping

from neuronserve.errors import StageError
from neuronserve.stage import atomic
from neuronserve.stage.client import translate
from neuronserve.stage.context import Batch, StageContext
from neuronserve.stage.hub import stage_hub
from neuronserve.stage.manifest import FileEntry, Manifest, local_complete
from neuronserve.stage.paths import S3Uri, parse_s3_uri, safe_relpath
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.s3engine import fetch_objects
from neuronserve.stage.sources import stage_archive, stage_prefix
from neuronserve.stage.transfer import RemoteObject
from neuronserve.types import AssetSpec, LaunchPlan

log = logging.getLogger("neuronserve.stage")

KIND_WORDS = {
    "model": "model",
    "lora": "LoRA adapter",
    "draft": "draft model",
    "quantized_checkpoint": "quantized checkpoint",
    "chat_template": "chat template",
}
_DIRECTORY_KINDS = frozenset({"model", "lora", "draft"})  # the engine loads these as directories
BOX_SUFFIX = ".staged"  # a single-file asset's staged copy lives in `<local>.staged/` (with its manifest)


def stage_assets(plan: LaunchPlan, ctx: StageContext) -> list[str]:
    """Stage every asset but the model (unless the model is a hub download), then write `plan.files`.

    Returns the local paths staged, in the plan's order.
    """
    staged = []
    for asset in plan.assets:
        if asset.kind == "model" and asset.fetch != "hub":
            continue  # sources.stage_model staged it
        staged.append(stage_asset(asset, ctx))
    write_files(plan.files)
    return staged


def label(asset: AssetSpec) -> str:
    """An asset's kind in words, and its name: "LoRA adapter 'sql'", "chat template"."""
    name = f" {asset.name!r}" if asset.name else ""
    return f"{KIND_WORDS.get(asset.kind, asset.kind)}{name}"


def describe(asset: AssetSpec) -> str:
    """How logs, progress lines and errors name an asset: its kind, its name, its source."""
    return f"{label(asset)} {asset.source}"


def stage_asset(asset: AssetSpec, ctx: StageContext) -> str:
    """Make `asset.local` hold the asset; a StageError names the setting that named it."""
    what = describe(asset)
    if asset.fetch == "local":
        return check_local(asset, what)
    if not asset.local:
        raise StageError(f"{what}: no local path planned for it")
    try:
        _fetch(asset, ctx, what)
    except StageError as err:
        if asset.origin and asset.origin not in str(err):
            raise StageError(f"{err} (named by {asset.origin})") from err
        raise
    log.info("%s: staged at %s", what, asset.local)
    return asset.local


def _fetch(asset: AssetSpec, ctx: StageContext, what: str) -> None:
    if asset.is_file and asset.fetch != "s3":
        raise StageError(f"{what}: a single-file asset comes from s3:// or a local path, not {asset.fetch}")
    if asset.fetch == "s3":
        if asset.is_file:
            stage_object(ctx, parse_s3_uri(asset.source), asset.local, what)
        else:
            stage_prefix(ctx, parse_s3_uri(asset.source), asset.local, what, check_fresh=True)
    elif asset.fetch == "archive":
        if not asset.source.startswith("s3://") and not os.path.isfile(asset.source):
            raise StageError(f"{what}: archive {asset.source} does not exist: fix the path or mount it")
        log.info("%s: extracting to %s", what, asset.local)
        stage_archive(ctx, asset.source, asset.local, label(asset))
    elif asset.fetch == "hub":
        stage_hub(asset.source, asset.revision, asset.local, ctx.hub, ctx.progress, what=what)
    else:
        raise StageError(f"{what}: unknown fetch kind {asset.fetch!r}")


def check_local(asset: AssetSpec, what: str) -> str:
    """A local asset is used in place (never copied): it must exist, as a file or directory as needed."""
    path = asset.local or asset.source
    via = f" (set by {asset.origin})" if asset.origin else ""
    if asset.is_file:
        problem = "is a directory, not a file" if os.path.isdir(path) else "does not exist"
        ok = os.path.isfile(path)
    elif asset.kind in _DIRECTORY_KINDS:
        problem = "is a file, not a directory" if os.path.isfile(path) else "does not exist"
        ok = os.path.isdir(path)
    else:
        problem, ok = "does not exist", os.path.exists(path)
    if not ok:
        raise StageError(f"{what}: {path}{via} {problem}: mount it or fix the path")
    return path


def stage_object(ctx: StageContext, src: S3Uri, local: str, what: str) -> Manifest:
    """One S3 object (a chat template) at the file path `local`.

    Staged like a prefix into `<local>.staged/` (lock, `.partial`, journal, manifest last, rename), then
    published at `local` as a hard link swapped in with a rename, so `local` is either absent or whole.
    A complete copy costs one HEAD per start: an object rewritten in place (new ETag or size) is fetched
    again; when S3 cannot be asked, the complete copy is used and the log says so.
    """
    if not src.key or src.key.endswith("/"):
        raise StageError(f"{what}: {src.uri} names a prefix; a single file needs the object's full key")
    box = local.rstrip("/") + BOX_SUFFIX
    done = local_complete(box, src.uri)
    if done is not None and _unchanged(ctx, src, done, what):
        _publish(box, done, local)
        return done
    with atomic.dir_lock(box):
        manifest = _fetch_object(ctx, src, box, what)
    _publish(box, manifest, local)
    return manifest


def _head(ctx: StageContext, src: S3Uri) -> RemoteObject:
    try:
        head = ctx.client().head_object(Bucket=src.bucket, Key=src.key)
    except Exception as err:
        raise translate(err, src.uri) from err
    name = safe_relpath(posixpath.basename(src.key), what="S3 key")
    return RemoteObject(src.key, name, int(head["ContentLength"]), str(head["ETag"]).strip('"'))


def _unchanged(ctx: StageContext, src: S3Uri, done: Manifest, what: str) -> bool:
    try:
        obj = _head(ctx, src)
    except (StageError, OSError) as err:
        log.warning(
            "%s: could not check %s for changes (%s); using the complete local copy", what, src.uri, err
        )
        return True
    if [(f.path, f.size, f.etag) for f in done.files] == [(obj.rel, obj.size, obj.etag)]:
        log.info("%s: complete copy (manifest present, unchanged in S3), nothing to download", what)
        return True
    log.warning("%s: %s changed in place since the local copy: fetching it again", what, src.uri)
    return False


def _fetch_object(ctx: StageContext, src: S3Uri, box: str, what: str) -> Manifest:
    obj = _head(ctx, src)
    done = local_complete(box, src.uri)  # another stager may have finished while we waited for the lock
    if done is not None and [(f.path, f.size, f.etag) for f in done.files] == [(obj.rel, obj.size, obj.etag)]:
        return done
    staging = atomic.staging_path(box)
    os.makedirs(staging, exist_ok=True)
    atomic.check_free_space(staging, obj.size, src.uri)
    with ProgressMeter(what, obj.size, ctx.progress) as meter:
        fetch_objects(ctx, Batch(src.bucket, [obj], staging, meter))
    atomic.prune(staging, {obj.rel})
    manifest = Manifest(source=src.uri, files=(FileEntry(obj.rel, obj.size, obj.etag, obj.key),))
    atomic.commit(staging, box, manifest)
    return manifest


def _publish(box: str, manifest: Manifest, local: str) -> None:
    """Put the staged file at `local`: a hard link (no second copy) renamed into place."""
    staged = os.path.join(box, manifest.files[0].path)
    if os.path.exists(local) and os.path.samefile(staged, local):
        return
    tmp = f"{local}.tmp-{os.getpid()}"
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        try:
            os.link(staged, tmp)
        except OSError:
            shutil.copyfile(staged, tmp)
        os.replace(tmp, local)
    except OSError as err:
        raise StageError(
            f"cannot place {local}: {err.strerror}; set NEURONSERVE_WORK_DIR to a writable disk"
        ) from err


def write_files(files: Mapping[str, str]) -> None:
    """Write each file the plan decided (path -> text): temp file, fsync, rename, so the engine never
    reads half a file; rewritten on every start (the plan, not the disk, is the truth)."""
    for path, text in files.items():
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError as err:
            raise StageError(
                f"cannot write {path} (a file the plan writes for the engine): {err.strerror}; "
                "set NEURONSERVE_WORK_DIR to a writable disk"
            ) from err
        log.info("wrote %s (%d bytes)", path, len(text.encode()))
