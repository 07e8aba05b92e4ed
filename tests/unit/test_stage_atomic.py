"""The all-at-once directory swap (stage/atomic.py) on a real temporary disk, without S3: each step's
promise checked on the files it leaves (added where mutation testing showed no unit test ran it)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from neuronserve.errors import StageError
from neuronserve.stage import atomic
from neuronserve.stage.manifest import FileEntry, Manifest, read_local
from neuronserve.stage.paths import JOURNAL_NAME, MANIFEST_NAME


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}


def test_staging_path() -> None:
    assert atomic.staging_path("/w/model/") == "/w/model.partial"
    assert atomic.staging_path("/w/model") == "/w/model.partial"


def test_prune_keeps_the_new_files_and_the_journal(tmp_path: Path) -> None:
    write(tmp_path, {"a": "1", "sub/b": "2", "old": "x", "sub/old": "y", JOURNAL_NAME: "j"})
    atomic.prune(str(tmp_path), {"a", "sub/b"})
    assert tree(tmp_path) == {"a": "1", "sub/b": "2", JOURNAL_NAME: "j"}


def test_commit_swaps_in_the_new_copy_with_its_manifest_last(tmp_path: Path) -> None:
    dest, staging = tmp_path / "model", tmp_path / "model.partial"
    write(dest, {"stale": "old copy"})
    write(staging, {"w.bin": "new", JOURNAL_NAME: "j"})
    manifest = Manifest("s3://b/m/", (FileEntry("w.bin", 3),))
    atomic.commit(str(staging), str(dest) + "/", manifest)
    assert not staging.exists()
    assert tree(dest).keys() == {"w.bin", MANIFEST_NAME}  # the journal and the old copy are gone
    assert read_local(str(dest)) == manifest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no .old-<pid> left


def test_free_space_is_checked_before_downloading(tmp_path: Path) -> None:
    atomic.check_free_space(str(tmp_path), 0, "s3://b/m/")
    with pytest.raises(StageError) as err:
        atomic.check_free_space(str(tmp_path), 1 << 60, "s3://b/m/")
    message = str(err.value)
    assert message.startswith(
        f"disk full: staging s3://b/m/ needs {(1 << 60) / 2**20:.1f} MiB more but {tmp_path} has "
    )
    assert message.endswith(
        "MiB free; use a larger volume (SageMaker VolumeSizeInGB / ECS ephemeral storage) "
        "or set NEURONSERVE_WORK_DIR"
    )


def test_the_lock_keeps_a_second_stager_out_until_the_first_is_done(tmp_path: Path) -> None:
    dest = str(tmp_path / "deep" / "model")
    order: list[str] = []
    inside = threading.Event()
    with atomic.dir_lock(dest + "/"):
        assert os.path.exists(dest + ".lock")

        def second() -> None:
            with atomic.dir_lock(dest):
                order.append("second")
                inside.set()

        t = threading.Thread(target=second)
        t.start()
        assert not inside.wait(0.3)  # blocked while the first holds it
        order.append("first done")
    t.join(10)
    assert order == ["first done", "second"]


def test_the_lock_names_the_fix_when_the_work_dir_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with (
        pytest.raises(StageError, match="set NEURONSERVE_WORK_DIR to a writable disk"),
        atomic.dir_lock(str(tmp_path / "file" / "model")),
    ):
        pass


def test_list_files_skips_bookkeeping_and_refuses_links(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "b/x": "1",
            "a": "2",
            MANIFEST_NAME: "m",
            MANIFEST_NAME + ".tmp": "t",
            JOURNAL_NAME: "j",
            "c.tmp": "3",
        },
    )
    assert atomic.list_files(str(tmp_path)) == ["a", "c.tmp", "b/x"]
    os.symlink(tmp_path / "a", tmp_path / "link")
    with pytest.raises(StageError, match="symbolic links are not copied to the cache"):
        atomic.list_files(str(tmp_path))
