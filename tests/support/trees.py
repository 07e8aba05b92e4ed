"""Small file trees for the stage tests: write some, read them back, pack them as a .tar.gz."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}


def tar_bytes(files: dict[str, bytes]) -> bytes:
    """A gzipped tar of regular files, {member name: content}, in that order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
