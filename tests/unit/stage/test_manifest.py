"""The completion manifest is a file format other hosts read (cache entries in S3, copies on disk): its
text is pinned here, what a reader fills in for absent fields, what a failed write leaves behind and how
the next start reads it, and the checksum recorded for uploaded artifacts, on a real disk without S3
(added where mutation testing showed these unchecked by the unit tier: docs/TESTING.md)."""

from __future__ import annotations

import hashlib
import json
import locale
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.trees import write

from neuronserve.errors import StageError
from neuronserve.stage import atomic
from neuronserve.stage.manifest import (
    FileEntry,
    Manifest,
    parse_manifest,
    read_local,
    sha256_file,
    write_local,
)
from neuronserve.stage.paths import MANIFEST_NAME

MANIFEST = Manifest(
    source="s3://b/cache/k1/",
    files=(FileEntry("a/model.pt", 3, "e1", "cache/k1/uploads/u1/a/model.pt", "ab"),),
    upload_id="u1",
    extra={"compiled_by": "x"},
)
TEXT = """{
 "extra": {
  "compiled_by": "x"
 },
 "files": [
  {
   "etag": "e1",
   "key": "cache/k1/uploads/u1/a/model.pt",
   "path": "a/model.pt",
   "sha256": "ab",
   "size": 3
  }
 ],
 "format": "neuronserve-manifest/1",
 "source": "s3://b/cache/k1/",
 "upload_id": "u1"
}"""


def test_the_manifest_text() -> None:
    assert MANIFEST.to_json() == TEXT
    assert parse_manifest(TEXT, where="x") == MANIFEST


def test_absent_optional_fields_read_as_empty() -> None:
    body = {"format": "neuronserve-manifest/1", "source": "s3://b/m/", "files": [{"path": "f", "size": 0}]}
    got = parse_manifest(json.dumps(body), where="x")
    assert got == Manifest("s3://b/m/", (FileEntry("f", 0, "", "", ""),), "", {})
    assert parse_manifest(json.dumps({**body, "extra": None}), where="x").extra == {}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            {"format": "neuronserve-manifest/2", "source": "s", "files": []},
            "format is not neuronserve-manifest/1",
        ),
        (
            {"format": "neuronserve-manifest/1", "source": "s", "files": [{"path": "f", "size": -1}]},
            "negative size for f",
        ),
        (
            {"format": "neuronserve-manifest/1", "source": "s", "files": [{"path": "../f", "size": 1}]},
            "refusing manifest path '../f'",
        ),
    ],
)
def test_invalid_manifests_say_where_and_why(body: dict[str, object], why: str) -> None:
    with pytest.raises(StageError) as err:
        parse_manifest(json.dumps(body), where="s3://b/k/m.json")
    assert str(err.value).startswith(f"invalid manifest at s3://b/k/m.json: {why}")


def test_written_and_read_back_with_no_temporary_left(tmp_path: Path) -> None:
    write_local(str(tmp_path), MANIFEST)
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST_NAME]
    assert (tmp_path / MANIFEST_NAME).read_text(encoding="utf-8") == TEXT
    assert read_local(str(tmp_path)) == MANIFEST


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    """The process's text encoding set to ASCII (LC_CTYPE=C), as on a host with a non-UTF-8 locale."""
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)


def test_a_failed_write_leaves_only_a_temporary_that_is_neither_complete_nor_published(
    tmp_path: Path,
) -> None:
    """A manifest write that fails after opening its temporary file (here: a value JSON cannot hold) leaves
    `<manifest>.tmp`, never the manifest itself: the next start sees the directory as incomplete, and
    publishing the directory skips the temporary as bookkeeping instead of uploading it as a model file."""
    write(tmp_path, {"w.bin": "abc"})
    broken = Manifest("s3://b/m/", (FileEntry("w.bin", 3),), extra={"not json": {1, 2}})
    with pytest.raises(TypeError):
        write_local(str(tmp_path), broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST_NAME + ".tmp", "w.bin"]
    assert read_local(str(tmp_path)) is None
    assert atomic.list_files(str(tmp_path)) == ["w.bin"]

    write_local(str(tmp_path), MANIFEST)  # the next write replaces the leftover
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST_NAME, "w.bin"]
    assert (tmp_path / MANIFEST_NAME).read_text(encoding="utf-8") == TEXT


@pytest.mark.usefixtures("ascii_locale")
def test_a_manifest_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """A manifest holding raw UTF-8 (a non-ASCII S3 prefix, written by another tool) reads the same on a
    host whose locale is not UTF-8: otherwise the copy counts as incomplete, or the read crashes."""
    text = TEXT.replace("s3://b/cache/k1/", "s3://b/modèle/")
    (tmp_path / MANIFEST_NAME).write_bytes(text.encode("utf-8"))
    got = read_local(str(tmp_path))
    assert got is not None and got.source == "s3://b/modèle/"


@pytest.mark.parametrize("bufsize", [1, 2, 3, 1 << 20])
def test_sha256_of_a_file_is_that_of_its_bytes_for_any_buffer(tmp_path: Path, bufsize: int) -> None:
    """The SHA-256 recorded for an uploaded artifact (which readers verify every byte against) is the
    digest of the whole file however it is read in chunks; an empty file has the empty digest."""
    (tmp_path / "f").write_bytes(b"abc")
    (tmp_path / "empty").write_bytes(b"")
    assert sha256_file(str(tmp_path / "f"), bufsize) == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    assert sha256_file(str(tmp_path / "empty"), bufsize) == hashlib.sha256(b"").hexdigest()


def test_sha256_default_buffer_reads_large_files_whole(tmp_path: Path) -> None:
    """A file larger than the default 4 MiB buffer is hashed over all its chunks."""
    data = bytes(range(256)) * (5 * 4096 + 7)
    (tmp_path / "big").write_bytes(data)
    assert sha256_file(str(tmp_path / "big")) == hashlib.sha256(data).hexdigest()


def test_manifest_round_trip_and_rejections() -> None:
    m = Manifest(
        source="s3://b/p/", files=(FileEntry("a/b.bin", 3, "e", "p/a/b.bin", "0" * 64),), upload_id="u1"
    )
    assert parse_manifest(m.to_json(), where="x") == m
    for text in (
        "",
        "[]",
        '{"format": "other", "files": []}',
        m.to_json().replace('"a/b.bin"', '"../b.bin"'),
    ):
        with pytest.raises(StageError, match="invalid manifest"):
            parse_manifest(text, where="x")
