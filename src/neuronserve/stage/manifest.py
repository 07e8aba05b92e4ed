"""The completion manifest: the file written LAST that marks a directory (or cache entry) complete.

A directory without a manifest is, by definition, unfinished and never used. The manifest records
where the copy came from and, per file, size and ETag (and SHA-256 for artifacts we upload), so a
re-run can trust a complete copy without asking S3, and a reader can verify every byte it fetched.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from neuronserve.errors import StageError
from neuronserve.stage.paths import MANIFEST_NAME, safe_relpath

FORMAT = "neuronserve-manifest/1"
LOCAL_COMPILE_SOURCE = "local-compile"  # the source of artifacts compiled on this host (no remote cache)


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative POSIX path inside the directory
    size: int
    etag: str = ""
    key: str = ""  # the S3 key it came from / was uploaded to
    sha256: str = ""


@dataclass(frozen=True)
class Manifest:
    source: str  # the URI this copy stands for (checked on re-use)
    files: tuple[FileEntry, ...]
    upload_id: str = ""  # cache entries: the sub-prefix the files live under
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> str:
        body = {
            "format": FORMAT,
            "source": self.source,
            "upload_id": self.upload_id,
            "extra": self.extra,
            "files": [asdict(f) for f in self.files],
        }
        return json.dumps(body, indent=1, sort_keys=True)


def parse_manifest(text: str | bytes, *, where: str) -> Manifest:
    """Parse and validate; any deviation raises StageError (callers treat the entry as absent)."""
    try:
        body = json.loads(text)
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise ValueError(f"format is not {FORMAT}")
        files = []
        for raw in body["files"]:
            entry = FileEntry(
                path=safe_relpath(str(raw["path"]), what="manifest path"),
                size=int(raw["size"]),
                etag=str(raw.get("etag", "")),
                key=str(raw.get("key", "")),
                sha256=str(raw.get("sha256", "")),
            )
            if entry.size < 0:
                raise ValueError(f"negative size for {entry.path}")
            files.append(entry)
        return Manifest(
            source=str(body["source"]),
            files=tuple(files),
            upload_id=str(body.get("upload_id", "")),
            extra=dict(body.get("extra") or {}),
        )
    except (ValueError, KeyError, TypeError, StageError) as err:
        raise StageError(f"invalid manifest at {where}: {err}") from err


def read_local(directory: str) -> Manifest | None:
    """The manifest of a local directory, or None when absent or unreadable (= not complete)."""
    path = os.path.join(directory, MANIFEST_NAME)
    try:
        with open(path, encoding="utf-8") as fh:
            return parse_manifest(fh.read(), where=path)
    except (OSError, StageError):
        return None


def write_local(directory: str, manifest: Manifest) -> None:
    """Write the manifest atomically (temp file, fsync, rename): it must never be seen half-written."""
    path = os.path.join(directory, MANIFEST_NAME)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(manifest.to_json())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def sha256_file(path: str, bufsize: int = 4 * 1024 * 1024) -> str:
    """SHA-256 of a file; hashlib releases the GIL on large buffers, so worker threads hash in parallel."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(bufsize):
            h.update(chunk)
    return h.hexdigest()


def local_complete(directory: str, source: str) -> Manifest | None:
    """A complete copy of `source` at `directory`: manifest present, same source, right sizes."""
    manifest = read_local(directory)
    if manifest is None or manifest.source != source:
        return None
    for f in manifest.files:
        try:
            if os.path.getsize(os.path.join(directory, f.path)) != f.size:
                return None
        except OSError:
            return None
    return manifest
