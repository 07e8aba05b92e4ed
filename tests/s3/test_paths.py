"""Pure checks of the key -> path mapping and the manifest parser (no server: unit tier)."""

from __future__ import annotations

import pytest

from neuronserve.errors import StageError
from neuronserve.stage.manifest import FileEntry, Manifest, parse_manifest
from neuronserve.stage.paths import check_no_conflicts, key_to_relpath, parse_s3_uri, safe_relpath


@pytest.mark.parametrize(
    ("key", "rel"),
    [
        ("p/a.json", "a.json"),
        ("p/sub/dir/w.bin", "sub/dir/w.bin"),
        ("p/sub/", None),
        ("p/", None),
        ("p/a//b", "a/b"),
    ],
)
def test_keys_map_under_the_prefix(key: str, rel: str | None) -> None:
    assert key_to_relpath(key, "p/") == rel


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "a/../../x",
        "/etc/passwd",
        "a\\..\\x",
        "a/./b",
        ".",
        "",
        "a\x00b",
        ".neuronserve-manifest.json",
        "d/.neuronserve-journal.jsonl",
        "w.bin.neuronserve-part",
    ],
)
def test_unsafe_names_are_refused(name: str) -> None:
    with pytest.raises(StageError, match="refusing"):
        safe_relpath(name, what="S3 key")


def test_key_outside_prefix_and_file_dir_clash_are_refused() -> None:
    with pytest.raises(StageError):
        key_to_relpath("other/x", "p/")
    with pytest.raises(StageError, match="both a file and a directory"):
        check_no_conflicts(["a", "a/b"], where="s3://b/p/")


def test_uri_parsing() -> None:
    uri = parse_s3_uri("s3://bucket/models/llama")
    assert (uri.bucket, uri.key, uri.as_prefix().uri) == (
        "bucket",
        "models/llama",
        "s3://bucket/models/llama/",
    )
    for bad in ("http://x/y", "s3:///key", "bucket/key"):
        with pytest.raises(StageError):
            parse_s3_uri(bad)


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


def test_cli_parser_does_not_import_the_s3_stack() -> None:
    """`neuronserve plan` builds the whole parser: the stage/cache commands must keep boto3 out of it."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys; from neuronserve import cli; cli.build_parser(); "
        "heavy = ('boto3', 'botocore', 's3transfer', 'neuronserve.stage.transfer'); "
        "bad = [m for m in heavy if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    proc = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": src}, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
