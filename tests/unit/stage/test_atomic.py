"""The all-at-once directory swap (stage/atomic.py) on a real temporary disk, without S3: each step's
promise checked on the files it leaves, and its edges: the free-space boundary and message, a commit with
no journal or a relative or linked destination, names that end in letters `rstrip` could eat, and
symlinked directories refused on publish (most added where mutation testing showed them unchecked by the
unit tier: docs/TESTING.md)."""

from __future__ import annotations

import os
import re
import shutil
import threading
from pathlib import Path

import pytest
from tests.support.trees import tree, write

from neuronserve.errors import StageError
from neuronserve.stage import atomic
from neuronserve.stage.manifest import FileEntry, Manifest, read_local
from neuronserve.stage.paths import JOURNAL_NAME, MANIFEST_NAME
from neuronserve.stage.progress import MIB


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


MANIFEST = Manifest("s3://b/m/", (FileEntry("w.bin", 3),))


def test_exactly_enough_free_space_is_enough(tmp_path: Path) -> None:
    """A copy that fills the volume to the last byte is allowed: only needing MORE than is free refuses.
    Other processes write to the disk, so the check is repeated until free space held still around it."""
    for _ in range(50):
        free = shutil.disk_usage(tmp_path).free
        try:
            atomic.check_free_space(str(tmp_path), free, "s3://b/m/")
            refused = False
        except StageError:
            refused = True
        if shutil.disk_usage(tmp_path).free == free:
            break
    assert not refused


def test_the_disk_full_message_gives_the_free_space_in_mib(tmp_path: Path) -> None:
    """The refusal states how much is free in MiB (the number the user compares with the volume size)."""
    with pytest.raises(StageError) as err:
        atomic.check_free_space(str(tmp_path), 1 << 60, "s3://b/m/")
    said = re.search(r" has ([0-9.]+) MiB free;", str(err.value))
    assert said is not None, str(err.value)
    free_mib = shutil.disk_usage(tmp_path).free / MIB
    assert abs(float(said.group(1)) - free_mib) < 1024  # other writers may move it a little, not by 2**20x


def test_a_destination_name_ending_in_x_is_kept_whole(tmp_path: Path) -> None:
    """Only trailing slashes are dropped from the destination: a directory named `llama-X/` stages into
    `llama-X.partial` and is committed as `llama-X`, not as `llama-`."""
    dest, staging = tmp_path / "llama-X", tmp_path / "llama-X.partial"
    assert atomic.staging_path(str(dest) + "/") == str(staging)
    write(staging, {"w.bin": "new"})
    atomic.commit(str(staging), str(dest) + "/", MANIFEST)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["llama-X"]
    assert read_local(str(dest)) == MANIFEST


def test_a_commit_without_a_journal_and_a_relative_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staging dir that never had a journal (a local compile) commits fine, and a destination given as a
    bare relative name (no parent part) is swapped in under the current directory."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "model.partial", {"w.bin": "new"})
    atomic.commit("model.partial", "model", MANIFEST)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    assert tree(tmp_path / "model") == {"w.bin": "new", MANIFEST_NAME: MANIFEST.to_json()}


def test_a_destination_that_is_a_link_is_replaced_without_touching_its_target(tmp_path: Path) -> None:
    """A destination the user made a symbolic link to a directory elsewhere is replaced by the real copy;
    the commit does not fail on removing the old entry, and the directory the link pointed to is kept."""
    elsewhere, dest, staging = tmp_path / "elsewhere", tmp_path / "model", tmp_path / "model.partial"
    write(elsewhere, {"mine": "keep"})
    os.symlink(elsewhere, dest)
    write(staging, {"w.bin": "new"})
    atomic.commit(str(staging), str(dest), MANIFEST)
    assert not dest.is_symlink() and read_local(str(dest)) == MANIFEST
    assert tree(elsewhere) == {"mine": "keep"}
    # and the link moved aside is gone too (rmtree refuses a link: it stayed as model.old-<pid>)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "model"]


def test_a_symlinked_directory_is_refused_on_publish(tmp_path: Path) -> None:
    """A link to a directory (which the walk does not enter) is refused like a file link, naming it, rather
    than silently left out of the published cache entry."""
    write(tmp_path / "real", {"x": "1"})
    write(tmp_path / "pub", {"a": "2"})
    os.symlink(tmp_path / "real", tmp_path / "pub" / "sub")
    with pytest.raises(StageError) as err:
        atomic.list_files(str(tmp_path / "pub"))
    assert str(err.value) == (
        f"refusing to publish {tmp_path / 'pub' / 'sub'}: symbolic links are not copied to the cache"
    )
