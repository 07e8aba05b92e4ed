"""Safe extraction of `model.tar.gz` (SageMaker's packaging) into a staging directory.

tarfile will happily write `../../etc/cron.d/x`, absolute paths, and follow links planted by an
earlier member. Here every member name goes through `safe_relpath`, and only regular files and
directories are accepted: symlinks, hard links and devices are refused with the member's name.
"""

from __future__ import annotations

import os
import shutil
import tarfile

from neuronserve.errors import StageError
from neuronserve.stage.manifest import FileEntry
from neuronserve.stage.paths import check_no_conflicts, safe_relpath
from neuronserve.stage.progress import ProgressMeter


def extract_tar(archive: str, staging: str, uri: str, meter: ProgressMeter | None = None) -> list[FileEntry]:
    """Extract `archive` into `staging`, refusing unsafe members; returns the files written."""
    entries: list[FileEntry] = []
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            members = tar.getmembers()
            for m in members:
                if not (m.isfile() or m.isdir()):
                    kind = "link" if (m.issym() or m.islnk()) else "special file"
                    raise StageError(
                        f"refusing archive member {m.name!r} in {uri}: {kind}s are not extracted"
                    )
                if m.isdir():
                    if m.name.rstrip("/") not in ("", "."):
                        safe_relpath(
                            m.name.lstrip("./") if m.name.startswith("./") else m.name,
                            what=f"archive member in {uri}",
                        )
                    continue
                name = m.name[2:] if m.name.startswith("./") else m.name
                entries.append(
                    FileEntry(path=safe_relpath(name, what=f"archive member in {uri}"), size=m.size)
                )
            check_no_conflicts([e.path for e in entries], where=uri)
            by_name = {(m.name[2:] if m.name.startswith("./") else m.name): m for m in members if m.isfile()}
            for entry in entries:
                member = by_name[entry.path] if entry.path in by_name else _find(members, entry.path)
                target = os.path.join(staging, entry.path)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                src = tar.extractfile(member)
                if src is None:
                    raise StageError(f"cannot read archive member {member.name!r} in {uri}")
                with src, open(target, "wb") as out:
                    while chunk := src.read(1024 * 1024):
                        out.write(chunk)
                        if meter is not None:
                            meter.add(len(chunk))
    except (tarfile.TarError, EOFError) as err:
        raise StageError(
            f"{uri} is not a readable .tar.gz ({err}); re-create it with `tar czf model.tar.gz -C dir .`"
        ) from err
    return entries


def _find(members: list[tarfile.TarInfo], rel: str) -> tarfile.TarInfo:
    for m in members:
        if (
            m.isfile()
            and safe_relpath(m.name[2:] if m.name.startswith("./") else m.name, what="member") == rel
        ):
            return m
    raise StageError(f"archive member {rel!r} vanished")


def remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
