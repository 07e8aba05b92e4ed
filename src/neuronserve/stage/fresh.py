"""Is a complete local copy of an S3 model prefix still what S3 holds? One listing says.

A persistent work directory (an ECS host volume, a long-lived instance) keeps the staged model between
starts. When the S3 prefix is updated in place (same keys, same sizes, new content), trusting the local
manifest alone would serve the old model silently. So a model start lists the prefix once (one LIST per
1,000 objects, no GET) and compares each key's size and ETag with the manifest; S3 gives a new ETag to
every rewritten object, multipart or not. Only what differs is fetched: the unchanged files are
hard-linked into the staging directory and journaled, so the fetchers (s5cmd or Python) skip them, and
the refreshed copy replaces the old one atomically like any other copy.

When S3 cannot be asked (no network, no permission), the complete local copy is used and the log says
so: a start must not fail because a check for updates could not run.
"""

from __future__ import annotations

import logging
import os
import shutil

from neuronserve.errors import StageError
from neuronserve.stage import atomic
from neuronserve.stage.context import StageContext
from neuronserve.stage.manifest import Manifest
from neuronserve.stage.paths import S3Uri
from neuronserve.stage.s3engine import list_with_s5cmd
from neuronserve.stage.transfer import Journal, RemoteObject, list_prefix

log = logging.getLogger("neuronserve.stage")


def list_for_check(ctx: StageContext, src: S3Uri, what: str, dest: str) -> list[RemoteObject] | None:
    """The prefix's listing, or None (logged) when S3 cannot be asked right now."""
    try:
        return list_with_s5cmd(ctx, src) or list_prefix(ctx.client(), src)
    except (StageError, OSError) as err:
        log.warning(
            "%s: could not check %s for changes (%s); using the complete local copy at %s",
            what,
            src.uri,
            err,
            dest,
        )
        return None


def _state(manifest: Manifest) -> dict[str, tuple[int, str]]:
    return {f.path: (f.size, f.etag) for f in manifest.files}


def changes(manifest: Manifest, objects: list[RemoteObject]) -> bool:
    """True when any key was added, removed, resized or rewritten (new ETag) since the copy."""
    return _state(manifest) != {o.rel: (o.size, o.etag) for o in objects}


def describe(manifest: Manifest, objects: list[RemoteObject]) -> str:
    old = _state(manifest)
    new = {o.rel: (o.size, o.etag) for o in objects}
    changed = sum(1 for rel, v in new.items() if rel in old and old[rel] != v)
    added = sum(1 for rel in new if rel not in old)
    removed = sum(1 for rel in old if rel not in new)
    return f"{changed} changed, {added} new, {removed} removed"


def seed_staging(dest: str, staging: str, manifest: Manifest, objects: list[RemoteObject], uri: str) -> None:
    """Put the unchanged files into the staging dir (hard links, copies across devices) and journal
    them, so the fetch that follows transfers only the changed and new objects."""
    os.makedirs(staging, exist_ok=True)
    journal = Journal(staging)
    done = journal.load()
    old = _state(manifest)
    need = 0
    for obj in objects:
        key = (obj.size, obj.etag)
        if old.get(obj.rel) != key:
            need += obj.size
            continue
        if done.get(obj.rel) == key:
            continue
        target = os.path.join(staging, obj.rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.lexists(target):
            os.unlink(target)
        source = os.path.join(dest, obj.rel)
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)
        journal.record(obj)
    atomic.check_free_space(staging, need, uri)
