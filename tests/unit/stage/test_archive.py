"""stage/archive.py on local archives: the limits come from their rows, a failed extraction removes
only what it wrote, member names are bounded, and no module reads archives with the interpreter's
tarfile (the hostile archives, each in a resource-capped child, are in tests/s3/stage/test_archive.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.support.trees import tar_bytes

from neuronserve.errors import ConfigError, StageError
from neuronserve.stage.archive import ArchiveLimits, extract_tar


def test_limits_come_from_the_table_rows() -> None:
    limits = ArchiveLimits.from_environ(
        {"NEURONSERVE_ARCHIVE_MAX_MEMBERS": "10", "NEURONSERVE_ARCHIVE_MAX_BYTES": "2048"}
    )
    assert (limits.max_members, limits.max_bytes) == (10, 2048)
    assert ArchiveLimits.from_environ({}) == ArchiveLimits(max_members=100_000, max_bytes=None)
    with pytest.raises(ConfigError, match="NEURONSERVE_ARCHIVE_MAX_MEMBERS"):
        ArchiveLimits.from_environ({"NEURONSERVE_ARCHIVE_MAX_MEMBERS": "0"})
    with pytest.raises(ConfigError, match="NEURONSERVE_ARCHIVE_MAX_BYTES"):
        ArchiveLimits.from_environ({"NEURONSERVE_ARCHIVE_MAX_BYTES": "lots"})


def _tar_file(path: Path, files: dict[str, bytes]) -> str:
    path.write_bytes(tar_bytes(files))
    return str(path)


def test_a_failed_extraction_removes_only_what_it_wrote(tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "kept.txt").write_text("there before")
    archive = _tar_file(tmp_path / "a.tar.gz", {"a/b.txt": b"1", "c.txt": b"2", "a/b.txt ": b"3"})
    extract_tar(archive, str(staging), "a.tar.gz", limits=ArchiveLimits())  # distinct names: fine
    shutil_tree = sorted(str(p.relative_to(staging)) for p in staging.rglob("*"))
    assert shutil_tree == ["a", "a/b.txt", "a/b.txt ", "c.txt", "kept.txt"]
    for p in ("a/b.txt", "a/b.txt ", "c.txt"):
        (staging / p).unlink()
    (staging / "a").rmdir()
    dup = _tar_file(tmp_path / "d.tar.gz", {"a/b.txt": b"1", "c.txt": b"2", "a/./b.txt": b"3"})
    with pytest.raises(StageError, match="'\\.\\.' or '\\.' would escape"):
        extract_tar(dup, str(staging), "d.tar.gz", limits=ArchiveLimits())
    assert sorted(os.listdir(staging)) == ["kept.txt"]


def test_member_names_are_bounded_in_total(tmp_path: Path) -> None:
    archive = _tar_file(tmp_path / "a.tar.gz", {f"{i:050d}": b"" for i in range(30)})
    staging = tmp_path / "s"
    staging.mkdir()
    with pytest.raises(StageError, match="member names total more than 1024 bytes after 21 members"):
        extract_tar(archive, str(staging), "a.tar.gz", limits=ArchiveLimits(max_name_bytes=1024))
    assert os.listdir(staging) == []


def test_a_staging_directory_the_extraction_made_is_removed_on_failure(tmp_path: Path) -> None:
    good = _tar_file(tmp_path / "g.tar.gz", {"a/b.txt": b"1"})
    files = extract_tar(good, str(tmp_path / "new"), "g.tar.gz", limits=ArchiveLimits())
    assert [(f.path, f.size) for f in files] == [("a/b.txt", 1)]
    dup = _tar_file(tmp_path / "d.tar.gz", {"a/b.txt": b"1", "c.txt": b"2", "a//b.txt": b"3"})
    with pytest.raises(StageError, match=r"'a//b\.txt'.*came earlier in the archive"):
        extract_tar(dup, str(tmp_path / "other"), "d.tar.gz", limits=ArchiveLimits())
    assert not (tmp_path / "other").exists()


def test_no_source_module_reads_archives_with_the_interpreters_tarfile() -> None:
    """The image's Python may lack tarfile's fixes (CVE-2025-8194 needs 3.12.12+): extraction must
    keep going through stage/tarread.py, so no module may import tarfile or call unpack_archive."""
    src = Path(__file__).resolve().parents[3] / "src" / "neuronserve"
    offenders = [
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        if any(
            line.strip().startswith(("import tarfile", "from tarfile")) or "unpack_archive(" in line
            for line in path.read_text().splitlines()
        )
    ]
    assert offenders == []
