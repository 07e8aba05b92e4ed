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


def _name(member: tarfile.TarInfo) -> str:
    return member.name[2:] if member.name.startswith("./") else member.name


def extract_tar(archive: str, staging: str, uri: str, meter: ProgressMeter | None = None) -> list[FileEntry]:
    """Extract `archive` into `staging`, refusing unsafe members; returns the files written.

    Every member is checked before the first byte is written, so a refused archive leaves nothing.
    """
    what = f"archive member in {uri}"
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            files: list[tuple[str, tarfile.TarInfo]] = []
            for m in tar.getmembers():
                if not (m.isfile() or m.isdir()):
                    kind = "link" if (m.issym() or m.islnk()) else "special file"
                    raise StageError(
                        f"refusing archive member {m.name!r} in {uri}: {kind}s are not extracted"
                    )
                if m.isdir():
                    if _name(m).strip("/") not in ("", "."):
                        safe_relpath(_name(m), what=what)
                    continue
                files.append((safe_relpath(_name(m), what=what), m))
            check_no_conflicts([rel for rel, _ in files], where=uri)
            for rel, member in files:
                target = os.path.join(staging, rel)
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
    return [FileEntry(path=rel, size=m.size) for rel, m in files]


def remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
