"""Hostile model archives, each staged in a child process under hard resource caps.

The caps (address space, largest file, CPU seconds, plus a wall-clock timeout) are what stands
between a check that does not hold and a full disk or a hung test run: an archive that got past
the checks is stopped by the kernel, and the test fails on the child's exit instead of the test
machine failing. Each case must end quickly with a StageError that says what was refused, and
leave nothing behind that could pass for a model (no model directory, an empty staging one).
"""

from __future__ import annotations

import gzip
import io
import os
import re
import resource
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.s3.stage_child import STAGE_ERROR_EXIT
from tests.support.tarblocks import END, header, octal

pytestmark = pytest.mark.s3
ROOT = Path(__file__).resolve().parents[3]
SRC = str(ROOT / "src")
MIB = 1024 * 1024
AS_CAP = 1024 * MIB  # the child's whole address space
FSIZE_CAP = 64 * MIB  # the largest file it may write
CPU_CAP = 30  # seconds of CPU
WALL = 90  # seconds before the test gives up on it
QUICK = 20  # seconds a refusal may take on this (shared, slow) machine


def _caps() -> None:
    """In the child, before exec: the kernel enforces these whatever the code under test does."""
    resource.setrlimit(resource.RLIMIT_AS, (AS_CAP, AS_CAP))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_CAP, FSIZE_CAP))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_CAP, CPU_CAP))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails (EFBIG), not a kill


def run_capped(uri: str, dest: Path, env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    """Stage `uri` into `dest` in a capped child; (exit code, stdout, stderr, seconds)."""
    child_env = {
        **os.environ,
        **(env or {}),
        "PYTHONPATH": os.pathsep.join([SRC, str(ROOT), *sys.path]),
    }
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.s3.stage_child", uri, str(dest), "archive"],
            env=child_env,
            cwd=str(ROOT),
            capture_output=True,
            text=True,
            timeout=WALL,
            preexec_fn=_caps,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"staging {uri} was still running after {WALL} s (hung)")
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start


def left_behind(out: Path) -> list[str]:
    """Everything under `out` except the lock file and an EMPTY staging directory."""
    found = []
    for root, dirs, files in os.walk(out):
        for name in files + dirs:
            rel = os.path.relpath(os.path.join(root, name), out)
            if rel in ("model.lock", "model.partial"):
                continue
            found.append(rel)
    return sorted(found)


# ---- archive builders -------------------------------------------------------------------------


class Zeros(io.RawIOBase):
    """`n` zero bytes, produced as read (a gzip bomb's payload without holding it in memory)."""

    def __init__(self, n: int) -> None:
        self.left = n

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        self.left -= size
        return bytes(size)


def tar_gz(members: list[tuple[tarfile.TarInfo, Any]], fmt: int = tarfile.GNU_FORMAT) -> bytes:
    """A gzip'd tar of (info, data) pairs; data is bytes, a readable, or None (no data)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=fmt, compresslevel=9) as tar:
        for info, data in members:
            if isinstance(data, bytes):
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if isinstance(data, bytes) else data)
    return buf.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, **attrs: Any) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


CONFIG = (member("config.json"), b"{}")


def tar_slip() -> bytes:
    return tar_gz([CONFIG, (member("a/../../escape.txt"), b"x")])


def absolute() -> bytes:
    return tar_gz([CONFIG, (member("/tmp/abs-escape.txt"), b"x")])


def symlink() -> bytes:
    return tar_gz([CONFIG, (member("link", tarfile.SYMTYPE, linkname="/etc/passwd"), None)])


def hardlink() -> bytes:
    return tar_gz([CONFIG, (member("hard", tarfile.LNKTYPE, linkname="config.json"), None)])


def fifo() -> bytes:
    return tar_gz([CONFIG, (member("pipe", tarfile.FIFOTYPE), None)])


def char_device() -> bytes:
    return tar_gz([CONFIG, (member("null", tarfile.CHRTYPE, devmajor=1, devminor=3), None)])


def sparse_8gib() -> bytes:
    """A GNU 1.0 sparse member (pax keys, as `tar --format=pax -S` writes): 8 GiB in ~200 bytes."""
    real = 8 * 1024**3
    sparse_map = b"1\n%d\n1\n" % (real - 1)
    body = sparse_map.ljust(512, b"\0") + b"\0"  # the map block, then the one stored byte
    info = member("GNUSparseFile.0/weights.bin")
    info.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": "weights.bin",
        "GNU.sparse.realsize": str(real),
    }
    blob = tar_gz([CONFIG, (info, body)], fmt=tarfile.PAX_FORMAT)
    assert len(blob) < 1024
    return blob


def gnu_sparse_header() -> bytes:
    """An old-GNU type S member declaring 8 GiB (its realsize field) while storing nothing."""
    h = bytearray(header(b"weights.bin", octal(0), b"S"))
    h[257:265] = b"ustar  \0"
    h[483:495] = octal(8 * 1024**3)
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return gzip.compress(bytes(h) + END)


def gzip_bomb() -> bytes:
    """100 MB of zeros in one member, ~100 KB compressed (over the 16 MiB limit the test sets)."""
    blob = tar_gz([CONFIG, (member("weights.bin", size=100_000_000), Zeros(100_000_000))])
    assert len(blob) < 200_000
    return blob


def larger_than_the_disk() -> bytes:
    """A member whose (base-256) size field declares 1 EiB; no data follows."""
    return gzip.compress(header(b"weights.bin", b"\x80" + (2**60).to_bytes(11, "big")) + END)


def empty_members(n: int) -> bytes:
    return gzip.compress(b"".join(header(b"f%07d" % i, octal(0)) for i in range(n)) + END, 1)


def duplicate_names() -> bytes:
    return tar_gz([CONFIG, (member("model.safetensors"), b"first"), (member("model.safetensors"), b"second")])


def file_then_directory() -> bytes:
    return tar_gz([CONFIG, (member("tokenizer"), b"x"), (member("tokenizer/vocab.json"), b"{}")])


def negative_size() -> bytes:
    """CVE-2025-8194: a size of -512 sends CPython's tarfile back to this same header, forever."""
    negative = b"\xff" + (256**11 - 512).to_bytes(11, "big")
    return gzip.compress(header(b"config.json", octal(0)) + header(b"evil.bin", negative) + END)


def bad_checksum() -> bytes:
    h = bytearray(header(b"config.json", octal(2)))
    h[0] = ord("C")  # changed after the checksum was computed
    return gzip.compress(bytes(h) + b"{}".ljust(512, b"\0") + END)


def truncated() -> bytes:
    blob = tar_gz([CONFIG, (member("weights.bin"), os.urandom(300_000))])
    return blob[: len(blob) // 2]


def no_end_marker() -> bytes:
    return gzip.compress(header(b"config.json", octal(2)) + b"{}".ljust(512, b"\0"))


SPECIAL = r"special files \(devices, FIFOs\) are not extracted"
SPARSE = r"'weights\.bin'.*sparse files are not extracted.*8192\.0 MiB"
CASES: dict[str, tuple[Callable[[], bytes], dict[str, str], str]] = {
    "tar-slip": (tar_slip, {}, r"refusing archive member in .* 'a/\.\./\.\./escape\.txt': '\.\.'"),
    "absolute": (absolute, {}, r"refusing archive member in .* '/tmp/abs-escape\.txt': absolute"),
    "symlink": (symlink, {}, r"refusing archive member 'link'.*links are not extracted"),
    "hardlink": (hardlink, {}, r"refusing archive member 'hard'.*links are not extracted"),
    "fifo": (fifo, {}, r"refusing archive member 'pipe'.*" + SPECIAL),
    "char-device": (char_device, {}, r"refusing archive member 'null'.*" + SPECIAL),
    "sparse-8gib-pax": (sparse_8gib, {}, SPARSE),
    "sparse-8gib-gnu": (gnu_sparse_header, {}, SPARSE),
    "gzip-bomb": (
        gzip_bomb,
        {"NEURONSERVE_ARCHIVE_MAX_BYTES": str(16 * MIB)},
        r"'weights\.bin' declares 95\.4 MiB.*over NEURONSERVE_ARCHIVE_MAX_BYTES=16777216",
    ),
    "larger-than-disk": (larger_than_the_disk, {}, r"disk full: .* expands to at least .* MiB free"),
    "member-limit": (
        lambda: empty_members(1001),
        {"NEURONSERVE_ARCHIVE_MAX_MEMBERS": "1000"},
        r"more than 1000 members \(NEURONSERVE_ARCHIVE_MAX_MEMBERS=1000\).*member 1001",
    ),
    "duplicate-names": (duplicate_names, {}, r"'model\.safetensors'.*came earlier.*duplicate names"),
    "file-then-directory": (file_then_directory, {}, r"'tokenizer'.*came earlier in the archive"),
    "negative-size": (negative_size, {}, r"not a readable \.tar\.gz \(the size field .* is negative"),
    "bad-checksum": (bad_checksum, {}, r"not a readable \.tar\.gz \(.*bad checksum"),
    "truncated": (truncated, {}, r"not a readable \.tar\.gz \(.*(truncated|Compressed file ended)"),
    "no-end-marker": (no_end_marker, {}, r"not a readable \.tar\.gz \(.*no end-of-archive marker"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_archive_is_refused_quickly_and_leaves_nothing(case: str, tmp_path: Path) -> None:
    build, env, expected = CASES[case]
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(build())
    out = tmp_path / "out"
    rc, stdout, stderr, seconds = run_capped(str(archive), out / "model", env)
    assert rc == STAGE_ERROR_EXIT, f"exit {rc}: {stdout[-2000:]}{stderr[-3000:]}"
    assert re.search(expected, stderr), stderr[-3000:]
    assert "Traceback" not in stderr
    assert seconds < QUICK, f"took {seconds:.1f} s"
    assert left_behind(out) == []
    assert not os.listdir(out / "model.partial") if (out / "model.partial").exists() else True
    assert sorted(os.listdir(tmp_path)) == ["model.tar.gz", "out"]  # nothing escaped either


def test_the_default_member_limit_stops_100k_empty_members(tmp_path: Path) -> None:
    """100,001 empty members, no setting: stopped at the default limit, within the memory cap."""
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(empty_members(100_001))
    out = tmp_path / "out"
    rc, stdout, stderr, seconds = run_capped(str(archive), out / "model")
    assert rc == STAGE_ERROR_EXIT, f"exit {rc}: {stdout[-2000:]}{stderr[-3000:]}"
    assert "more than 100000 members (NEURONSERVE_ARCHIVE_MAX_MEMBERS=100000)" in stderr
    assert seconds < 3 * QUICK, f"took {seconds:.1f} s"
    assert left_behind(out) == []


def test_a_genuine_archive_extracts_under_the_same_caps(tmp_path: Path) -> None:
    """The control: the caps and limits let a real model archive through, byte for byte."""
    files = {
        "config.json": b'{"model_type": "llama"}',
        "tokenizer/tokenizer.json": b"{}" * 1000,
        "empty.txt": b"",
        "model.safetensors": os.urandom(5 * MIB + 7),
        "d/" + "long-name-" * 20 + ".bin": b"long",
    }
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(tar_gz([(member(k), v) for k, v in files.items()], fmt=tarfile.PAX_FORMAT))
    dest = tmp_path / "out" / "model"
    rc, stdout, stderr, _ = run_capped(str(archive), dest, {"NEURONSERVE_ARCHIVE_MAX_MEMBERS": "5"})
    assert rc == 0, stderr[-3000:]
    assert sorted(p for p in stdout.splitlines() if not p.startswith(".neuronserve-")) == sorted(files)
    for rel, data in files.items():
        assert (dest / rel).read_bytes() == data


def test_a_gzip_bomb_from_s3_is_refused(s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path) -> None:
    """The same limit holds for an s3:// archive (downloaded first, then checked while extracting)."""
    s3.put_object(Bucket=bucket, Key="pkg/model.tar.gz", Body=gzip_bomb())
    out = tmp_path / "out"
    env = {**s3_env, "NEURONSERVE_ARCHIVE_MAX_BYTES": str(16 * MIB)}
    rc, _, stderr, seconds = run_capped(f"s3://{bucket}/pkg/model.tar.gz", out / "model", env)
    assert rc == STAGE_ERROR_EXIT, stderr[-3000:]
    assert "over NEURONSERVE_ARCHIVE_MAX_BYTES=16777216" in stderr
    assert seconds < QUICK
    assert [p for p in left_behind(out) if not p.startswith("model.download")] == []
