"""The completion manifest is a file format other hosts read (cache entries in S3, copies on disk): its
text is pinned here, and what a reader fills in for absent fields (added where mutation testing showed
the format and the defaults unchecked: docs/TESTING.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronserve.errors import StageError
from neuronserve.stage.manifest import FileEntry, Manifest, parse_manifest, read_local, write_local
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
