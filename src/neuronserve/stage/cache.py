"""The compile cache: fetch a verified entry (hit) or hand the engine a fresh directory (miss).

An entry counts only if its manifest parses and every file it names arrives with the right size
and SHA-256; anything else is a warning and a miss (the engine compiles, and write-back replaces the
bad entry). Errors reading a keyed cache never stop the server: they are logged and treated as a
miss. An explicit `NEURON_COMPILED_ARTIFACTS=s3://...` is different: the user asked for exactly that
location, so its errors are fatal, and a prefix without our manifest is copied as is.
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import Any, Literal

from neuronserve.errors import StageError
from neuronserve.stage import atomic, events
from neuronserve.stage.client import translate
from neuronserve.stage.context import Batch, StageContext
from neuronserve.stage.manifest import (
    LOCAL_COMPILE_SOURCE,
    Manifest,
    local_complete,
    parse_manifest,
    sha256_file,
)
from neuronserve.stage.paths import MANIFEST_NAME, S3Uri, parse_s3_uri
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.s3engine import fetch_objects
from neuronserve.stage.sources import copy_prefix_locked
from neuronserve.stage.transfer import RemoteObject, list_prefix
from neuronserve.types import ArtifactSpec

log = logging.getLogger("neuronserve.stage")
CacheState = Literal["hit", "miss", "off"]


class CacheMissError(StageError):
    """NEURONSERVE_REQUIRE_CACHE_HIT=true and the keyed compiled artifacts are not in the cache."""

    def __init__(self, spec: ArtifactSpec, uri: str, why: str = "") -> None:
        key = uri.rstrip("/").rsplit("/", 1)[-1] if spec.mode == "keyed" else None
        super().__init__(
            "compile cache miss with NEURONSERVE_REQUIRE_CACHE_HIT=true: no complete compiled artifacts "
            + (f"for cache key {key} " if key else "")
            + f"at {uri}{f' ({why})' if why else ''}; nothing was compiled. Compile once where a compile may "
            f"run (same settings, NEURONSERVE_REQUIRE_CACHE_HIT unset), then upload with "
            f"`neuronserve cache push <dir>{f' --key {key}' if key else ''}`"
        )


def read_remote_manifest(client: Any, remote: S3Uri) -> Manifest | None:
    """The entry's manifest; None when absent; StageError when unreadable or invalid."""
    key = remote.key + MANIFEST_NAME
    try:
        body = client.get_object(Bucket=remote.bucket, Key=key)["Body"].read()
    except Exception as err:
        code = getattr(err, "response", {}).get("Error", {}).get("Code", "")
        if code in ("NoSuchKey", "404"):
            return None
        raise translate(err, remote.uri) from err
    manifest = parse_manifest(body, where=f"s3://{remote.bucket}/{key}")
    if not manifest.upload_id:
        raise StageError(f"invalid manifest at s3://{remote.bucket}/{key}: no upload id")
    return manifest


def fetch_entry(ctx: StageContext, remote: S3Uri, manifest: Manifest, local_dir: str) -> None:
    """Download and verify every file the manifest names, then swap the directory into place."""
    objects = []
    for f in manifest.files:
        key = f.key or f"{remote.key}uploads/{manifest.upload_id}/{f.path}"
        if not key.startswith(remote.key):
            raise StageError(f"manifest of {remote.uri} points outside the entry: {key}")
        objects.append(RemoteObject(key, f.path, f.size, f.etag))
    wanted = {f.path: f for f in manifest.files}

    def verify(obj: RemoteObject, path: str) -> None:
        want = wanted[obj.rel].sha256
        if want and sha256_file(path) != want:
            raise StageError(f"{remote.uri}{obj.rel}: content does not match the manifest's SHA-256")

    staging = atomic.staging_path(local_dir)
    shutil.rmtree(staging, ignore_errors=True)  # never resume into a tree from another upload id
    os.makedirs(staging)
    atomic.check_free_space(staging, manifest.total_bytes, remote.uri)
    with ProgressMeter(f"artifacts {remote.uri}", manifest.total_bytes, ctx.progress) as meter:
        fetch_objects(ctx, Batch(remote.bucket, objects, staging, meter, verify, whole_prefix=True))
    atomic.prune(staging, set(wanted))
    atomic.commit(staging, local_dir, manifest)


def fresh_dir(local_dir: str) -> None:
    """A miss compiles into an empty directory: leftovers of a killed compile must not be loaded."""
    shutil.rmtree(local_dir, ignore_errors=True)
    os.makedirs(local_dir)


def stage_owned_local(local_dir: str) -> tuple[str, CacheState]:
    """No remote cache: reuse this host's earlier compile only if it was marked complete after READY.

    Without the marker the directory is what a killed compile left behind: cleared, so the plugin
    compiles from scratch instead of loading half-written artifacts.
    """
    if local_complete(local_dir, LOCAL_COMPILE_SOURCE) is not None:
        log.info("compiled artifacts from an earlier start on this host: %s", local_dir)
        return local_dir, "hit"
    if os.path.isdir(local_dir) and os.listdir(local_dir):
        log.warning("clearing %s: an unfinished compile (no completion manifest) was left there", local_dir)
    fresh_dir(local_dir)
    return local_dir, "miss"


def stage_artifacts(spec: ArtifactSpec, ctx: StageContext) -> tuple[str | None, CacheState]:
    """Make `spec.local_dir` hold usable artifacts (hit) or be empty for the compiler (miss)."""
    if spec.mode == "local" and spec.owned and spec.local_dir:
        return stage_owned_local(spec.local_dir)
    if spec.mode in ("off", "local") or not spec.remote_uri:
        if spec.local_dir:
            os.makedirs(spec.local_dir, exist_ok=True)
        return spec.local_dir, "off"
    if not spec.local_dir:
        raise StageError(f"no local artifacts directory planned for {spec.remote_uri}")
    local_dir = spec.local_dir
    remote = parse_s3_uri(spec.remote_uri).as_prefix()
    if local_complete(local_dir, remote.uri) is not None:
        log.info("compile cache hit: %s already holds %s", local_dir, remote.uri)
        return local_dir, "hit"
    with atomic.dir_lock(local_dir):
        if local_complete(local_dir, remote.uri) is not None:
            return local_dir, "hit"
        if _remote_hit(spec, local_dir, remote, ctx):
            return local_dir, "hit"
    fresh_dir(local_dir)
    return local_dir, "miss"


def _remote_hit(spec: ArtifactSpec, local_dir: str, remote: S3Uri, ctx: StageContext) -> bool:
    """Fetch the remote entry into `local_dir` (True), or say it is a miss (False): none there, or a
    corrupt one ignored. Raises CacheMissError when a hit is required, and an explicit location's
    errors other than a bad manifest. Runs under the directory lock."""
    client = ctx.client()
    try:
        manifest = read_remote_manifest(client, remote)
        if manifest is not None:
            fetch_entry(ctx, remote, manifest, local_dir)
            log.info("compile cache hit: %s -> %s (upload %s)", remote.uri, local_dir, manifest.upload_id)
            return True
        if spec.mode == "explicit" and _plain_copy(ctx, remote, local_dir):
            return True
        if spec.require_hit:
            raise CacheMissError(spec, remote.uri)
        log.info("compile cache miss: no entry at %s; the engine compiles into %s", remote.uri, local_dir)
    except CacheMissError:
        raise
    except StageError as err:
        if spec.require_hit:
            raise CacheMissError(spec, remote.uri, str(err)) from None
        if spec.mode == "explicit" and "manifest" not in str(err) and "SHA-256" not in str(err):
            raise
        log.warning("ignoring compile cache entry %s (treated as a miss): %s", remote.uri, err)
        events.emit("corrupt")
        shutil.rmtree(atomic.staging_path(local_dir), ignore_errors=True)
    return False


def _plain_copy(ctx: StageContext, remote: S3Uri, local_dir: str) -> bool:
    """An explicit location without our manifest (e.g. `aws s3 cp` of a compiled dir): copy it as is."""
    try:
        objects = list_prefix(ctx.client(), remote)
    except StageError as err:
        if str(err).startswith("no objects under"):
            return False
        raise
    if any(o.rel.startswith("uploads/") for o in objects):
        log.warning("%s has uploads but no manifest (a writer died or is still writing): a miss", remote.uri)
        return False
    copy_prefix_locked(ctx, remote, local_dir, f"artifacts {remote.uri}")
    return True
