"""Safe extraction of `model.tar.gz` (SageMaker's packaging) into a staging directory.

An archive is attacker-controlled input. tarfile will happily write `../../etc/cron.d/x`, absolute
paths, and follow links planted by an earlier member; here every member name goes through
`safe_relpath`, and only regular files and directories are accepted: symlinks, hard links, devices
and sparse files are refused with the member's name. Headers are read by our own bounded reader
(stage/tarread.py), never by the interpreter's tarfile, whose fix for crafted headers a given
Python may lack.

Sizes are checked before bytes are written, in one streaming pass: each member's declared size is
added to the total and checked against `NEURONSERVE_ARCHIVE_MAX_BYTES` and the destination's free
space BEFORE that member is written, and the count of members against
`NEURONSERVE_ARCHIVE_MAX_MEMBERS`. The compressed size says nothing about either (a 130 KB gzip
expands to 130 MB of zeros; a 198-byte sparse member declares 8 GiB). A duplicate name is refused
(a second copy would win on disk while the manifest listed both, so every start re-extracted).
Whatever goes wrong, what this extraction wrote is removed: no partial tree is left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from neuronserve.config.stage import StageOptions, parse_stage
from neuronserve.errors import StageError
from neuronserve.stage.manifest import FileEntry
from neuronserve.stage.paths import safe_relpath
from neuronserve.stage.progress import MIB, ProgressMeter
from neuronserve.stage.tarread import BadArchive, Member, TarReader, open_stream

GIB = 1024 * MIB
FIX = "re-create it with `tar czf model.tar.gz -C dir .`"


@dataclass(frozen=True)
class ArchiveLimits:
    """What one archive may expand to. `max_bytes` None: the free space less `free_margin`.

    `max_name_bytes` bounds the member names held in memory (the manifest lists every file), so
    memory stays bounded whatever the member count limit is raised to.
    """

    max_members: int = 100_000
    max_bytes: int | None = None
    max_name_bytes: int = 64 * MIB

    @classmethod
    def from_options(cls, options: StageOptions) -> ArchiveLimits:
        """NEURONSERVE_ARCHIVE_MAX_MEMBERS and NEURONSERVE_ARCHIVE_MAX_BYTES, typed (config/stage.py)."""
        return cls(max_members=options.archive_max_members, max_bytes=options.archive_max_bytes)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ArchiveLimits:
        """The limits `environ` sets, through their rows (config/limitstable.py)."""
        return cls.from_options(parse_stage(environ))


def free_margin(free: int) -> int:
    """Room left for the manifest, logs and the engine: 5% of the free space, at most 1 GiB."""
    return min(GIB, free // 20)


class _Budget:
    """The running totals of one extraction, checked before each member is written."""

    def __init__(self, limits: ArchiveLimits, staging: str, uri: str) -> None:
        self.limits = limits
        self.uri = uri
        self.staging = staging
        self.free = shutil.disk_usage(staging).free
        self.room = self.free - free_margin(self.free)
        self.members = 0
        self.name_bytes = 0
        self.declared = 0
        self.written = 0

    def count(self, member: Member) -> None:
        self.members += 1
        self.name_bytes += len(member.name)
        if self.members > self.limits.max_members:
            raise StageError(
                f"{self.uri} has more than {self.limits.max_members} members "
                f"(NEURONSERVE_ARCHIVE_MAX_MEMBERS={self.limits.max_members}); extraction stopped at "
                f"member {self.members} ({member.name!r}). Raise the limit if the archive is genuine"
            )
        if self.name_bytes > self.limits.max_name_bytes:
            raise StageError(
                f"{self.uri}: the member names total more than {self.limits.max_name_bytes} bytes after "
                f"{self.members} members; extraction stopped. Pack the files with shorter names"
            )

    def reserve(self, member: Member) -> None:
        """Before writing `member`: the declared total must fit the limit and the disk."""
        total = self.declared + member.size
        cap = self.limits.max_bytes
        if cap is not None and total > cap:
            raise StageError(
                f"{self.uri}: member {member.name!r} declares {member.size / MIB:.1f} MiB, bringing the "
                f"archive to {total / MIB:.1f} MiB, over NEURONSERVE_ARCHIVE_MAX_BYTES={cap} "
                f"({cap / MIB:.1f} MiB); extraction stopped. Raise the limit if the archive is genuine"
            )
        if total > self.room:
            raise StageError(
                f"disk full: {self.uri} expands to at least {total / MIB:.1f} MiB (member "
                f"{member.name!r} declares {member.size / MIB:.1f} MiB) but {self.staging} has "
                f"{self.free / MIB:.1f} MiB free, less a {free_margin(self.free) / MIB:.1f} MiB margin; "
                "extraction stopped. Use a larger volume (SageMaker VolumeSizeInGB / ECS ephemeral "
                "storage) or set NEURONSERVE_WORK_DIR"
            )
        self.declared = total

    def wrote(self, n: int) -> None:
        """Bytes really written: never more than declared (the reader stops at the size), checked anyway."""
        self.written += n
        if self.written > self.declared:
            raise StageError(f"{self.uri}: more bytes than the headers declared; extraction stopped")


def _name(member: Member) -> str:
    return member.name[2:] if member.name.startswith("./") else member.name


def extract_tar(
    archive: str, staging: str, uri: str, meter: ProgressMeter | None = None, *, limits: ArchiveLimits
) -> list[FileEntry]:
    """Extract `archive` into the directory `staging` within `limits`, refusing unsafe members; returns
    the files.

    On any error, every entry this call created in `staging` is removed before the StageError is raised
    (and `staging` itself, when this call created it).
    """
    created = not os.path.isdir(staging)
    os.makedirs(staging, exist_ok=True)
    before = set(os.listdir(staging))
    try:
        return _extract(archive, staging, uri, meter, limits)
    except BaseException:
        if created:
            remove_tree(staging)
        else:
            _remove_new(staging, before)
        raise


def _extract(
    archive: str, staging: str, uri: str, meter: ProgressMeter | None, limits: ArchiveLimits
) -> list[FileEntry]:
    what = f"archive member in {uri}"
    budget = _Budget(limits, staging, uri)
    files: list[FileEntry] = []
    try:
        with contextlib.ExitStack() as stack:
            reader = TarReader(open_stream(archive, stack))
            for member in reader.members():
                budget.count(member)
                if member.kind in ("link", "special", "sparse"):
                    raise StageError(_refusal(member, uri))
                name = _name(member)
                if member.kind == "dir":
                    if name.strip("/") not in ("", "."):
                        _make_dirs(staging, safe_relpath(name, what=what), uri)
                    continue
                rel = safe_relpath(name, what=what)
                budget.reserve(member)
                _write(reader, rel, member, budget, meter)
                files.append(FileEntry(path=rel, size=member.size))
    except BadArchive as err:
        raise StageError(f"{uri} is not a readable .tar.gz ({err}); {FIX}") from None
    return files


def _refusal(member: Member, uri: str) -> str:
    if member.kind == "sparse":
        return (
            f"refusing archive member {member.name!r} in {uri}: sparse files are not extracted (one can "
            f"declare {member.size / MIB:.1f} MiB while storing almost nothing); re-create the archive "
            "without tar's --sparse (-S)"
        )
    kinds = "links" if member.kind == "link" else "special files (devices, FIFOs)"
    return f"refusing archive member {member.name!r} in {uri}: {kinds} are not extracted"


def _make_dirs(staging: str, rel: str, uri: str) -> None:
    try:
        os.makedirs(os.path.join(staging, rel), exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise StageError(
            f"refusing archive member {rel!r} in {uri}: a file of that name (or of a parent's) came "
            f"earlier in the archive; {FIX}"
        ) from None


def _write(reader: TarReader, rel: str, member: Member, budget: _Budget, meter: ProgressMeter | None) -> None:
    """Write one file member at `rel` under the budget's staging directory, refusing a name that exists
    already (a duplicate, or a directory)."""
    staging, uri = budget.staging, budget.uri
    target = os.path.join(staging, rel)
    if "/" in rel:
        _make_dirs(staging, os.path.dirname(rel), uri)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(target, flags, 0o644)
    except FileExistsError:
        kind = "directory" if os.path.isdir(target) else "file"
        raise StageError(
            f"refusing archive member {member.name!r} in {uri}: a {kind} of that name came earlier in "
            f"the archive (duplicate names: only one could be extracted); {FIX}"
        ) from None
    with open(fd, "wb") as out:
        for chunk in reader.data():
            budget.wrote(len(chunk))
            out.write(chunk)
            if meter is not None:
                meter.add(len(chunk))


def _remove_new(staging: str, before: set[str]) -> None:
    """Remove every entry of `staging` that was not there before the extraction started."""
    with contextlib.suppress(OSError):
        for entry in set(os.listdir(staging)) - before:
            path = os.path.join(staging, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)


def remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
