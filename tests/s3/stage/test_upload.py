"""stage/upload.py against the real moto server: a directory is published under a fresh upload id with
the manifest written last (sizes, ETags, SHA-256 of what was sent), and a compile is marked complete
locally only when there is something to mark."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
from tests.s3.conftest import ServerControl

from neuronserve.errors import StageError
from neuronserve.stage.cache import read_remote_manifest
from neuronserve.stage.client import make_client
from neuronserve.stage.manifest import LOCAL_COMPILE_SOURCE, read_local
from neuronserve.stage.paths import MANIFEST_NAME, parse_s3_uri
from neuronserve.stage.transfer import options_from
from neuronserve.stage.upload import mark_compiled, new_upload_id, publish_dir

pytestmark = pytest.mark.s3
FILES = {"model.neff": b"n" * 3_000_000, "sub/config.json": b"{}", "empty": b""}


def _tree(root: Path) -> Path:
    for rel, data in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def test_publish_uploads_every_file_then_the_manifest_naming_them(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path
) -> None:
    local = _tree(tmp_path / "compiled")
    remote = parse_s3_uri(f"s3://{bucket}/cache/k1")
    opts = options_from({**s3_env, "NEURONSERVE_S3_PART_MB": "1"})  # the big file goes up in parts
    manifest = publish_dir(make_client(s3_env), str(local), remote, opts)
    assert manifest.source == f"s3://{bucket}/cache/k1/"
    assert read_remote_manifest(s3, remote.as_prefix()) == manifest
    base = f"cache/k1/uploads/{manifest.upload_id}/"
    for entry in manifest.files:
        body = s3.get_object(Bucket=bucket, Key=entry.key)["Body"].read()
        assert entry.key == base + entry.path and body == FILES[entry.path]
        assert entry.size == len(body) and entry.sha256 == hashlib.sha256(body).hexdigest()
    puts = [path for method, path, _ in s3_server.all_requests(bucket) if method in ("PUT", "POST")]
    assert puts[-1] == f"/{bucket}/cache/k1/{MANIFEST_NAME}"  # written last: readers never see half


def test_two_publishes_of_one_key_keep_their_own_uploads(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    local = _tree(tmp_path / "compiled")
    remote = parse_s3_uri(f"s3://{bucket}/cache/k2/")
    first = publish_dir(make_client(s3_env), str(local), remote, options_from(s3_env))
    second = publish_dir(make_client(s3_env), str(local), remote, options_from(s3_env))
    assert first.upload_id != second.upload_id
    assert read_remote_manifest(s3, remote) == second  # the last complete writer wins


def test_nothing_to_publish_is_refused_naming_the_directory(s3_env: dict[str, str], tmp_path: Path) -> None:
    remote = parse_s3_uri("s3://never/cache/k/")
    (tmp_path / "empty").mkdir()
    with pytest.raises(StageError, match="has no files"):
        publish_dir(make_client(s3_env), str(tmp_path / "empty"), remote, options_from(s3_env))
    with pytest.raises(StageError, match="not a directory"):
        publish_dir(make_client(s3_env), str(tmp_path / "missing"), remote, options_from(s3_env))


def test_upload_ids_are_unique_and_start_with_the_utc_time() -> None:
    ids = {new_upload_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{12}", i) for i in ids)


def test_a_compile_is_marked_complete_only_when_there_is_one(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    mark_compiled(str(empty))
    assert read_local(str(empty)) is None
    local = _tree(tmp_path / "compiled")
    mark_compiled(str(local))
    marked = read_local(str(local))
    assert marked is not None and marked.source == LOCAL_COMPILE_SOURCE
    assert {(f.path, f.size) for f in marked.files} == {(rel, len(data)) for rel, data in FILES.items()}
