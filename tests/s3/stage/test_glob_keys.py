"""S3 keys with glob characters (`*`, `?`, `[`) staged byte for byte by the s5cmd engine.

Such keys are legal in S3 and pass our listing, but s5cmd expands a source URL with glob
characters as a wildcard unless the copy says `--raw`: one key per `cp` line then matched other
keys or nothing. Every path that hands s5cmd a single key (the per-key pass, an archive, keys the
wildcard copy skipped) is exercised here against the moto server, with the engine forced to s5cmd
so no fallback to the Python engine can hide a failure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from tests.s3.conftest import ServerControl
from tests.s3.helpers import make_plan, put_tree, read_tree, s3_model
from tests.support.trees import tar_bytes

from neuronserve.stage import stage_all
from neuronserve.stage.paths import MANIFEST_NAME
from neuronserve.types import ModelSpec

pytestmark = pytest.mark.s3

GLOB_FILES = {
    "config.json": b'{"model_type": "llama"}',
    "star*.json": b'{"star": 1}',
    "star-other.json": b'{"not": "the star"}',  # what `star*` would also match as a wildcard
    "what?.bin": os.urandom(70_000),
    "whatX.bin": b"a decoy for ?",
    "set[12].txt": b"brackets",
    "set1.txt": b"a decoy for [12]",
    "dir*/nested?.safetensors": os.urandom(1_200_000),
}


def s5cmd_env(s3_env: dict[str, str]) -> dict[str, str]:
    return {**s3_env, "NEURONSERVE_S3_ENGINE": "s5cmd"}  # s5cmd or an error: never the Python engine


def _fetched_keys(server: ServerControl, bucket: str) -> set[str]:
    return set(server.object_gets(bucket))


def test_glob_keys_under_a_plain_prefix_are_copied_exactly(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path
) -> None:
    put_tree(s3, bucket, "m/", GLOB_FILES)
    dest = tmp_path / "model"
    stage_all(s3_model(f"s3://{bucket}/m/", str(dest)), s5cmd_env(s3_env))
    got = read_tree(str(dest))
    assert got.pop(MANIFEST_NAME)
    assert got == GLOB_FILES


def test_a_prefix_with_glob_characters_is_copied_key_by_key(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path
) -> None:
    """A `*` in the prefix itself: no wildcard copy can be used, every key goes through `cp --raw`."""
    put_tree(s3, bucket, "we*rd?/", GLOB_FILES)
    put_tree(s3, bucket, "weXrdY/", {"leak.bin": b"a sibling the wildcard would match"})
    dest = tmp_path / "model"
    stage_all(s3_model(f"s3://{bucket}/we*rd?/", str(dest)), s5cmd_env(s3_env))
    got = read_tree(str(dest))
    assert got.pop(MANIFEST_NAME)
    assert got == GLOB_FILES
    assert not any(key.startswith("/weXrdY") for key in _fetched_keys(s3_server, bucket))


def test_an_archive_whose_key_has_glob_characters(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    s3.put_object(Bucket=bucket, Key="pkg/model?.tar.gz", Body=tar_bytes(GLOB_FILES))
    s3.put_object(Bucket=bucket, Key="pkg/modelX.tar.gz", Body=b"a decoy the wildcard would match")
    dest = tmp_path / "model"
    uri = f"s3://{bucket}/pkg/model?.tar.gz"
    plan = make_plan(ModelSpec(source="archive", uri=uri, local_path=str(dest)))
    stage_all(plan, s5cmd_env(s3_env))
    got = read_tree(str(dest))
    assert got.pop(MANIFEST_NAME)
    assert got == GLOB_FILES
