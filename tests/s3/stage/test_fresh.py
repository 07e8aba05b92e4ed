"""A complete model copy on a persistent work dir is checked against S3 with one listing.

In-place updates (same key, same size, new bytes) are fetched, and only they; an unchanged prefix costs
exactly one LIST request and no GET; when S3 cannot be asked, the complete local copy is still used."""

from __future__ import annotations

import os
from typing import Any

import pytest
from tests.s3.conftest import ServerControl
from tests.s3.helpers import put_tree, read_tree, s3_model, sample_files

from neuronserve.stage import stage_all
from neuronserve.stage.paths import MANIFEST_NAME

pytestmark = pytest.mark.s3


def _listings(requests: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [r for r in requests if r[0] == "GET" and "list-type=2" in r[2]]


def test_unchanged_prefix_costs_one_list_and_no_get(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Any, engine: str
) -> None:
    env = {**s3_env, "NEURONSERVE_S3_ENGINE": engine}
    put_tree(s3, bucket, "u/", sample_files(1))
    plan = s3_model(f"s3://{bucket}/u/", str(tmp_path / "model"))
    stage_all(plan, env)
    gets, before = s3_server.object_gets(bucket), len(s3_server.all_requests(bucket))
    stage_all(plan, env)
    new = s3_server.all_requests(bucket)[before:]
    assert len(new) == 1 and len(_listings(new)) == 1, new
    assert s3_server.object_gets(bucket) == gets


def fetch_and_read(
    plan: Any, env: dict[str, str], s3_server: ServerControl, bucket: str
) -> tuple[set[str], dict[str, bytes]]:
    """Stage again; the keys fetched (by the server's count of GETs) and the local tree."""
    gets = s3_server.object_gets(bucket)
    stage_all(plan, env)
    got = read_tree(plan.model.local_path)
    assert got.pop(MANIFEST_NAME)
    return {k for k, n in s3_server.object_gets(bucket).items() if n != gets.get(k, 0)}, got


def test_in_place_update_is_fetched_and_only_it(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Any, engine: str
) -> None:
    env = {**s3_env, "NEURONSERVE_S3_ENGINE": engine}
    files = sample_files(2)
    put_tree(s3, bucket, "p/", files)
    dest = str(tmp_path / "model")
    plan = s3_model(f"s3://{bucket}/p/", dest)
    stage_all(plan, env)
    weights = "model-00002.safetensors"
    updated = {**files, weights: os.urandom(len(files[weights]))}  # a fine-tune: same key, same size
    s3.put_object(Bucket=bucket, Key="p/" + weights, Body=updated[weights])
    assert fetch_and_read(plan, env, s3_server, bucket) == ({"p/" + weights}, updated)
    updated["added.json"] = b'{"new": true}'
    del updated["empty.txt"]
    s3.put_object(Bucket=bucket, Key="p/added.json", Body=updated["added.json"])
    s3.delete_object(Bucket=bucket, Key="p/empty.txt")
    assert fetch_and_read(plan, env, s3_server, bucket) == ({"p/added.json"}, updated)
    assert not os.path.exists(dest + ".partial")


def test_unreachable_s3_keeps_the_complete_copy(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Any
) -> None:
    files = sample_files(3)
    put_tree(s3, bucket, "d/", files)
    dest = str(tmp_path / "model")
    plan = s3_model(f"s3://{bucket}/d/", dest)
    stage_all(plan, s3_env)
    s3_server.deny.add(bucket)
    try:
        assert stage_all(plan, s3_env).model_dir == dest
    finally:
        s3_server.deny.discard(bucket)
    got = read_tree(dest)
    got.pop(MANIFEST_NAME)
    assert got == files
