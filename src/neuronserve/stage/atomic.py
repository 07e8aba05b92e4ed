"""Making a directory appear all at once: lock, stage into `<dest>.partial`, manifest last, rename.

The final path either does not exist or holds a complete copy with its manifest: a reader (the
engine, a second container sharing the volume) never sees a half-written tree. The staging directory
has a stable name, so a killed run resumes into it; a file lock keeps two stagers on one host apart.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator

from neuronserve.errors import StageError
from neuronserve.stage.manifest import Manifest, write_local
from neuronserve.stage.paths import JOURNAL_NAME, MANIFEST_NAME
from neuronserve.stage.progress import MIB


def staging_path(dest: str) -> str:
    return dest.rstrip("/") + ".partial"


@contextlib.contextmanager
def dir_lock(dest: str) -> Iterator[None]:
    """Exclusive lock on `<dest>.lock` for the whole staging of `dest` (released on exit or death)."""
    parent = os.path.dirname(dest.rstrip("/")) or "."
    try:
        os.makedirs(parent, exist_ok=True)
        fd = os.open(dest.rstrip("/") + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise StageError(
            f"cannot create {parent} for staging: {err}; set NEURONSERVE_WORK_DIR to a writable disk"
        ) from err
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def check_free_space(path: str, needed: int, uri: str) -> None:
    """Fail before downloading when the volume cannot hold the copy (clear message, no half-full disk)."""
    free = shutil.disk_usage(path).free
    if needed > free:
        raise StageError(
            f"disk full: staging {uri} needs {needed / MIB:.1f} MiB more but {path} has "
            f"{free / MIB:.1f} MiB free; use a larger volume (SageMaker VolumeSizeInGB / "
            "ECS ephemeral storage) or set NEURONSERVE_WORK_DIR"
        )


def prune(staging: str, keep: set[str]) -> None:
    """Delete files in the staging dir that the new copy does not contain (left from an older source)."""
    for root, _dirs, files in os.walk(staging):
        for name in files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, staging).replace(os.sep, "/")
            if rel not in keep and rel != JOURNAL_NAME:
                os.unlink(path)


def commit(staging: str, dest: str, manifest: Manifest) -> None:
    """Manifest last, then swap the directory into place; an older copy is moved aside and removed."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(staging, JOURNAL_NAME))
    write_local(staging, manifest)
    dest = dest.rstrip("/")
    old = None
    if os.path.lexists(dest):
        old = f"{dest}.old-{os.getpid()}"
        os.rename(dest, old)
    os.rename(staging, dest)
    fsync_dir(os.path.dirname(dest) or ".")
    if old is not None:
        if os.path.islink(old):  # a link the user made: removed, its target kept (rmtree refuses links)
            os.unlink(old)
        else:
            shutil.rmtree(old, ignore_errors=True)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def list_files(directory: str) -> list[str]:
    """Relative POSIX paths of regular files, without our bookkeeping; symlinks are refused, not followed."""
    out: list[str] = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, directory).replace(os.sep, "/")
            if rel in (MANIFEST_NAME, JOURNAL_NAME) or (
                rel.endswith(".tmp") and rel.startswith(MANIFEST_NAME)
            ):
                continue
            if os.path.islink(path):
                raise StageError(f"refusing to publish {path}: symbolic links are not copied to the cache")
            out.append(rel)
    return out
