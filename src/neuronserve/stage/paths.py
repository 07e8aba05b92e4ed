"""Pure key -> path mapping and the safety checks every remote name passes before it touches the disk.

Remote names (S3 keys, archive members) are attacker-controlled input: a key like `p/../../etc/x`
or an absolute path must never write outside the target directory. All mapping goes through
`safe_relpath`, so the rule lives in one place and is unit-testable without S3.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from neuronserve.errors import StageError

MANIFEST_NAME = ".neuronserve-manifest.json"
JOURNAL_NAME = ".neuronserve-journal.jsonl"
PART_SUFFIX = ".neuronserve-part"
RESERVED = (MANIFEST_NAME, MANIFEST_NAME + ".tmp", JOURNAL_NAME)  # .tmp: manifest.write_local's own


@dataclass(frozen=True)
class S3Uri:
    """`s3://bucket/key-or-prefix`, split once; `uri` is the text shown in messages."""

    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def as_prefix(self) -> S3Uri:
        """The same location read as a directory: a trailing slash, so `p` never matches `p2/`."""
        if not self.key or self.key.endswith("/"):
            return self
        return S3Uri(self.bucket, self.key + "/")

    def child(self, rel: str) -> S3Uri:
        return S3Uri(self.bucket, self.as_prefix().key + rel)


def parse_s3_uri(uri: str) -> S3Uri:
    """Split an s3:// URI; a ConfigError-like StageError names the bad value."""
    if not uri.startswith("s3://"):
        raise StageError(f"{uri!r} is not an s3:// URI; expected s3://bucket/prefix/")
    rest = uri[len("s3://") :]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise StageError(f"{uri!r} has no bucket name; expected s3://bucket/prefix/")
    return S3Uri(bucket, key)


def safe_relpath(name: str, *, what: str) -> str:
    """Return `name` as a clean relative POSIX path, or raise if it could escape the target directory.

    Refused: empty names, absolute paths, backslashes (Windows separators smuggling `..`), any `.` or
    `..` component, NUL bytes, and our own bookkeeping names as any component (a key must not overwrite
    the manifest, nor make a directory of its name that the manifest could then not be written over).
    """
    if not name or "\x00" in name:
        raise StageError(f"refusing {what} {name!r}: empty or NUL in name")
    if name.startswith("/") or "\\" in name:
        raise StageError(f"refusing {what} {name!r}: absolute path or backslash would escape the target")
    parts = name.split("/")
    if any(p in ("..", ".") for p in parts):
        raise StageError(f"refusing {what} {name!r}: '..' or '.' would escape the target directory")
    parts = [p for p in parts if p]
    if not parts:
        raise StageError(f"refusing {what} {name!r}: no file name")
    rel = posixpath.join(*parts)
    if any(p in RESERVED or p.endswith(PART_SUFFIX) for p in parts):  # a directory of that name blocks ours
        raise StageError(f"refusing {what} {name!r}: the name is reserved for neuronserve's bookkeeping")
    return rel


def key_to_relpath(key: str, prefix: str) -> str | None:
    """Map an S3 key under `prefix` to a relative path; None for directory markers (`dir/`, size 0)."""
    if not key.startswith(prefix):
        raise StageError(f"refusing S3 key {key!r}: not under prefix {prefix!r}")
    rest = key[len(prefix) :]
    if rest == "" or rest.endswith("/"):
        return None
    return safe_relpath(rest, what="S3 key")


def check_no_conflicts(rels: list[str], *, where: str) -> None:
    """A file `a` and a file `a/b` cannot both exist on disk; say so before downloading anything."""
    files = set(rels)
    for rel in rels:
        parent = posixpath.dirname(rel)
        while parent:
            if parent in files:
                raise StageError(f"{where}: {parent!r} is both a file and a directory prefix of {rel!r}")
            parent = posixpath.dirname(parent)
