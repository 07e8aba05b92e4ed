"""Each model source kind, staged for real from the moto server (or the local disk)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from tests.s3.conftest import ServerControl
from tests.s3.helpers import make_plan, put_tree, read_tree, s3_model, sample_files
from tests.support.trees import tar_bytes

from neuronserve.stage import stage_all
from neuronserve.stage.paths import MANIFEST_NAME
from neuronserve.types import ModelSpec, Progress

pytestmark = pytest.mark.s3


def test_s3_prefix_is_copied_with_manifest(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Any, engine: str
) -> None:
    s3_env = {**s3_env, "NEURONSERVE_S3_ENGINE": engine}
    files = sample_files()
    put_tree(s3, bucket, "llama/", files)
    put_tree(s3, bucket, "llama2/", {"other.bin": b"not ours"})  # a sibling prefix must not leak in
    dest = str(tmp_path / "model")
    seen: list[Progress] = []
    result = stage_all(s3_model(f"s3://{bucket}/llama", dest), s3_env, seen.append)
    assert result.model_dir == dest
    assert result.cache == "off"
    got = read_tree(dest)
    assert got.pop(MANIFEST_NAME)
    assert got == files
    assert not os.path.exists(dest + ".partial")
    assert seen
    assert seen[-1].done_bytes == sum(len(v) for v in files.values()) == seen[-1].total_bytes


def test_complete_copy_rerun_lists_once_and_fetches_nothing(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Any
) -> None:
    put_tree(s3, bucket, "m/", sample_files(1))
    plan = s3_model(f"s3://{bucket}/m/", str(tmp_path / "model"))
    stage_all(plan, s3_env)
    first = s3_server.object_gets(bucket)
    assert sum(first.values()) >= 5  # ranged parts of the 3 MiB file + small files
    before = len(s3_server.all_requests(bucket))
    stage_all(plan, s3_env)
    assert s3_server.object_gets(bucket) == first
    assert len(s3_server.all_requests(bucket)) == before + 1  # one listing: is the copy still current?


def test_archive_from_s3_and_local(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Any, engine: str
) -> None:
    s3_env = {**s3_env, "NEURONSERVE_S3_ENGINE": engine}
    files = {"config.json": b"{}", "weights/model.safetensors": os.urandom(2_500_000)}
    blob = tar_bytes(files)
    s3.put_object(Bucket=bucket, Key="pkg/model.tar.gz", Body=blob)
    s3.put_object(Bucket=bucket, Key="pkg/unrelated-neighbour.bin", Body=b"n" * 1000)
    dest = str(tmp_path / "from-s3")
    plan = make_plan(ModelSpec(source="archive", uri=f"s3://{bucket}/pkg/model.tar.gz", local_path=dest))
    assert stage_all(plan, s3_env).model_dir == dest
    got = read_tree(dest)
    got.pop(MANIFEST_NAME)
    assert got == files
    assert not os.path.exists(dest + ".download")
    assert "pkg/unrelated-neighbour.bin" not in s3_server.object_gets(bucket)

    local = tmp_path / "model.tar.gz"
    local.write_bytes(blob)
    dest2 = str(tmp_path / "from-local")
    plan2 = make_plan(ModelSpec(source="archive", uri=str(local), local_path=dest2))
    stage_all(plan2, s3_env)
    got2 = read_tree(dest2)
    got2.pop(MANIFEST_NAME)
    assert got2 == files


def test_local_sagemaker_and_hub_sources_are_used_in_place(s3_env: dict[str, str], tmp_path: Any) -> None:
    model = tmp_path / "opt-ml-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    for kind in ("sagemaker", "local"):
        plan = make_plan(ModelSpec(source=kind, uri=str(model), local_path=str(model)))  # type: ignore[arg-type]
        assert stage_all(plan, s3_env).model_dir == str(model)
    assert sorted(os.listdir(model)) == ["config.json"]  # nothing written into a read-only mount
    # a hub id in the local hub cache (as huggingface_hub lays it out): left to the engine, which loads it
    snapshot = tmp_path / "hf" / "hub" / "models--org--model" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("a" * 40)
    hub = make_plan(ModelSpec(source="hub", uri="org/model", local_path=None))
    assert stage_all(hub, {**s3_env, "HF_HOME": str(tmp_path / "hf")}).model_dir is None
