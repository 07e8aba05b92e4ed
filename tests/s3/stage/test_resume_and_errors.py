"""A killed download resumes without re-fetching finished files; each failure names the URI and the fix."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.s3.conftest import ServerControl
from tests.s3.helpers import make_plan, put_tree, read_tree, s3_model, sample_files
from tests.s3.killed import fetched_again, kill_when

from neuronserve.errors import StageError
from neuronserve.stage import stage_all
from neuronserve.stage.paths import JOURNAL_NAME, MANIFEST_NAME
from neuronserve.types import ModelSpec

pytestmark = pytest.mark.s3


def test_killed_download_resumes_without_refetching(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path, engine: str
) -> None:
    s3_env = {**s3_env, "NEURONSERVE_S3_ENGINE": engine}
    files = sample_files(2)
    files["zz-slow.bin"] = os.urandom(200_000)
    put_tree(s3, bucket, "m/", files)
    release = threading.Event()
    s3_server.hold[f"/{bucket}/m/zz-slow.bin"] = release
    dest = str(tmp_path / "model")
    journal = Path(dest + ".partial") / JOURNAL_NAME
    finished = lambda: journal.exists() and len(journal.read_text().splitlines()) == len(files) - 1  # noqa: E731
    try:
        kill_when(
            ["tests.s3.stage_child", f"s3://{bucket}/m/", dest],
            {**s3_env, "NEURONSERVE_S3_CONCURRENCY": "2"},
            finished,
            30,
        )
    finally:
        release.set()
        del s3_server.hold[f"/{bucket}/m/zz-slow.bin"]
    assert not os.path.exists(dest)  # nothing visible at the final path
    before = s3_server.object_gets(bucket)
    stage_all(s3_model(f"s3://{bucket}/m/", dest), s3_env)
    after = s3_server.object_gets(bucket)
    assert fetched_again(before, after) == {"m/zz-slow.bin": 1}
    got = read_tree(dest)
    got.pop(MANIFEST_NAME)
    assert got == files


@pytest.mark.parametrize(
    ("setup", "uri", "expect"),
    [
        (
            "none",
            "s3://ns-no-such-bucket-xyz/m/",
            ["s3://ns-no-such-bucket-xyz/m/", "does not exist", "bucket name"],
        ),
        ("empty", "s3://{bucket}/nothing-here/", ["s3://{bucket}/nothing-here/", "no objects", "prefix"]),
        ("deny", "s3://{bucket}/m/", ["access denied to s3://{bucket}/m/", "IAM role"]),
        ("redirect", "s3://{bucket}/m/", ["s3://{bucket}/m/", "wrong region", "AWS_REGION=eu-central-1"]),
    ],
)
def test_errors_name_the_uri_and_the_fix(
    s3: Any,
    bucket: str,
    s3_env: dict[str, str],
    s3_server: ServerControl,
    tmp_path: Path,
    setup: str,
    uri: str,
    expect: list[str],
) -> None:
    put_tree(s3, bucket, "m/", {"config.json": b"{}"})
    if setup == "deny":
        s3_server.deny.add(bucket)
    if setup == "redirect":
        s3_server.redirect[bucket] = "eu-central-1"
    try:
        with pytest.raises(StageError) as info:
            stage_all(s3_model(uri.format(bucket=bucket), str(tmp_path / "model")), s3_env)
    finally:
        s3_server.deny.discard(bucket)
        s3_server.redirect.pop(bucket, None)
    for part in expect:
        assert part.format(bucket=bucket) in str(info.value)
    assert "testing-secret-value" not in str(info.value)
    assert not os.path.exists(tmp_path / "model")


def test_disk_full_is_reported_before_downloading(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True
    ).returncode:
        pytest.skip("cannot mount tmpfs here")
    try:
        put_tree(s3, bucket, "big/", {"weights.bin": os.urandom(3 * 1024 * 1024)})
        with pytest.raises(StageError) as info:
            stage_all(s3_model(f"s3://{bucket}/big/", str(mnt / "model")), s3_env)
        assert "disk full" in str(info.value)
        assert f"s3://{bucket}/big/" in str(info.value)
        assert "NEURONSERVE_WORK_DIR" in str(info.value)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.parametrize(
    "key", ["m/../escape.txt", "m/a/../../escape.txt", "m//abs.txt", "m/.neuronserve-manifest.json"]
)
def test_traversal_keys_are_refused(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path, key: str
) -> None:
    put_tree(s3, bucket, "", {"m/config.json": b"{}", key: b"evil"})
    dest = tmp_path / "deep" / "model"
    with pytest.raises(StageError, match="refusing"):
        stage_all(s3_model(f"s3://{bucket}/m/", str(dest)), s3_env)
    assert not (tmp_path / "deep" / "escape.txt").exists()
    assert not (tmp_path / "escape.txt").exists()
    assert not dest.exists()


def _tar_with(member: tarfile.TarInfo, data: bytes = b"x") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        ok = tarfile.TarInfo("config.json")
        ok.size = 2
        tar.addfile(ok, io.BytesIO(b"{}"))
        if member.isfile():
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
        else:
            tar.addfile(member)
    return buf.getvalue()


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


@pytest.mark.parametrize(
    "member",
    [
        tarfile.TarInfo("../escape.txt"),
        tarfile.TarInfo("/tmp/abs-escape.txt"),
        tarfile.TarInfo("a/../../escape.txt"),
        _link("link", "/etc/passwd", tarfile.SYMTYPE),
        _link("hard", "/etc/passwd", tarfile.LNKTYPE),
    ],
    ids=["dotdot", "absolute", "nested-dotdot", "symlink", "hardlink"],
)
def test_unsafe_archive_members_are_refused(
    s3_env: dict[str, str], tmp_path: Path, member: tarfile.TarInfo
) -> None:
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(_tar_with(member))
    dest = tmp_path / "out" / "model"
    plan = make_plan(ModelSpec(source="archive", uri=str(archive), local_path=str(dest)))
    with pytest.raises(StageError, match="refusing archive member"):
        stage_all(plan, s3_env)
    assert not dest.exists()
    assert not (tmp_path / "out" / "escape.txt").exists()
    assert not (tmp_path / "escape.txt").exists()


def test_progress_is_logged(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path, caplog: Any
) -> None:
    put_tree(s3, bucket, "p/", sample_files(3))
    with caplog.at_level("INFO", logger="neuronserve.stage"):
        stage_all(s3_model(f"s3://{bucket}/p/", str(tmp_path / "model")), s3_env)
    lines = [r.getMessage() for r in caplog.records if "MiB/s" in r.getMessage()]
    assert lines and "100.0%" in lines[-1] and "ETA" in lines[-1]
    assert not any("testing-secret-value" in r.getMessage() for r in caplog.records)
    json.dumps([r.getMessage() for r in caplog.records])


def test_throttling_and_dropped_connections_are_retried(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path, engine: str
) -> None:
    files = {"big.bin": os.urandom(2_500_000), "small.json": b'{"a": 1}'}
    put_tree(s3, bucket, "r/", files)
    s3_server.faults[f"/{bucket}/r/big.bin"] = ["slowdown", "drop", "slowdown"]
    s3_server.faults[f"/{bucket}/r/small.json"] = ["drop", "slowdown"]
    env = {**s3_env, "NEURONSERVE_S3_ENGINE": engine}
    try:
        stage_all(s3_model(f"s3://{bucket}/r/", str(tmp_path / "model")), env)
    finally:
        left = {k: s3_server.faults.pop(k) for k in list(s3_server.faults) if bucket in k}
    assert all(not v for v in left.values())  # every injected fault was hit
    got = read_tree(str(tmp_path / "model"))
    got.pop(MANIFEST_NAME)
    assert got == files
