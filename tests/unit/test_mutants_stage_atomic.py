"""The all-at-once directory swap (stage/atomic.py) at its edges, on a real temporary disk without S3: the
free-space boundary and message, a commit with no journal or a relative or linked destination, names that
end in letters `rstrip` could eat, and symlinked directories refused on publish (added where mutation
testing showed these unchecked by the unit tier)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from tests.unit.test_stage_atomic import tree, write

from neuronserve.errors import StageError
from neuronserve.stage import atomic
from neuronserve.stage.manifest import FileEntry, Manifest, read_local
from neuronserve.stage.paths import MANIFEST_NAME
from neuronserve.stage.progress import MIB

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
