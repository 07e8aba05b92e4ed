"""The compile cache against the moto server: miss -> write-back -> hit, bad entries, racing writers.

The test stands in for the Neuron compiler: on a miss it writes files into the artifacts directory
stage_all returned, exactly where the plugin would, before calling publish_artifacts.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.s3.conftest import ServerControl
from tests.s3.helpers import make_plan, read_tree

from neuronserve.stage import publish_artifacts, stage_all
from neuronserve.stage.client import make_client
from neuronserve.stage.paths import MANIFEST_NAME, parse_s3_uri
from neuronserve.stage.transfer import options_from
from neuronserve.stage.upload import publish_dir
from neuronserve.types import ArtifactSpec, LaunchPlan, ModelSpec

pytestmark = pytest.mark.s3


def keyed_plan(
    tmp: Path, remote: str, host: str = "a", mode: str = "keyed", read_only: bool = False
) -> LaunchPlan:
    model = tmp / "model"
    model.mkdir(exist_ok=True)
    art = ArtifactSpec(
        mode=mode, local_dir=str(tmp / host / "artifacts" / "k1"), remote_uri=remote, read_only=read_only
    )  # type: ignore[arg-type]
    return make_plan(
        ModelSpec(source="local", uri=str(model), local_path=str(model)), art, work_dir=str(tmp / host)
    )


def compile_into(directory: str, tag: str, size: int = 1_500_000) -> dict[str, bytes]:
    files = {
        "model.pt": (tag.encode() * size)[:size],
        "neuron_config.json": json.dumps({"tag": tag}).encode(),
        "weights/tp0.safetensors": tag.encode() * 1000,
    }
    for rel, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(directory, rel)), exist_ok=True)
        Path(directory, rel).write_bytes(data)
    return files


def tree(directory: str) -> dict[str, bytes]:
    got = read_tree(directory)
    got.pop(MANIFEST_NAME, None)
    return got


def test_miss_writeback_then_hit(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path, engine: str
) -> None:
    s3_env = {**s3_env, "NEURONSERVE_S3_ENGINE": engine}
    remote = f"s3://{bucket}/cache/k1/"
    first = keyed_plan(tmp_path, remote, "host-a")
    result = stage_all(first, s3_env)
    assert result.cache == "miss"
    assert result.artifacts_dir == first.artifacts.local_dir
    assert os.listdir(result.artifacts_dir) == []
    files = compile_into(result.artifacts_dir, "A")
    publish_artifacts(first, result, s3_env)
    manifest = json.loads(s3.get_object(Bucket=bucket, Key="cache/k1/" + MANIFEST_NAME)["Body"].read())
    assert {f["path"] for f in manifest["files"]} == set(files)
    assert all(len(f["sha256"]) == 64 for f in manifest["files"])

    second = keyed_plan(tmp_path, remote, "host-b")  # another instance, empty disk
    hit = stage_all(second, s3_env)
    assert hit.cache == "hit"
    assert tree(hit.artifacts_dir or "") == files
    publish_artifacts(second, hit, s3_env)  # a hit never writes back
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert len([k for k in keys if "/uploads/" in k]) == len(files)

    before = len(s3_server.all_requests(bucket))
    assert stage_all(second, s3_env).cache == "hit"  # complete local copy: no request at all
    assert len(s3_server.all_requests(bucket)) == before
    assert stage_all(first, s3_env).cache == "hit"  # the writer's own copy is marked complete too


def test_read_only_cache_never_writes(s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path) -> None:
    plan = keyed_plan(tmp_path, f"s3://{bucket}/cache/k1/", read_only=True)
    result = stage_all(plan, s3_env)
    assert result.cache == "miss"
    compile_into(result.artifacts_dir or "", "R")
    publish_artifacts(plan, result, s3_env)
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


@pytest.mark.parametrize(
    "damage", ["no-manifest", "bad-json", "corrupt-file", "missing-file", "escaping-path"]
)
def test_damaged_entry_is_a_miss_with_warning(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path, caplog: Any, damage: str
) -> None:
    remote = parse_s3_uri(f"s3://{bucket}/cache/k1/")
    src = tmp_path / "built"
    compile_into(str(src), "D")
    opts = options_from(s3_env)
    manifest = publish_dir(make_client(s3_env), str(src), remote, opts)
    mkey = "cache/k1/" + MANIFEST_NAME
    entry = manifest.files[0]
    if damage == "no-manifest":
        s3.delete_object(Bucket=bucket, Key=mkey)
    elif damage == "bad-json":
        s3.put_object(Bucket=bucket, Key=mkey, Body=b'{"format": "neuronserve-manifest/1", "files": [')
    elif damage == "corrupt-file":  # same size, different bytes, uploaded under the same key
        s3.put_object(Bucket=bucket, Key=entry.key, Body=b"X" * entry.size)
        body = json.loads(manifest.to_json())
        for f in body["files"]:
            f["etag"] = s3.head_object(Bucket=bucket, Key=f["key"])["ETag"].strip('"')
        s3.put_object(Bucket=bucket, Key=mkey, Body=json.dumps(body).encode())
    elif damage == "missing-file":
        s3.delete_object(Bucket=bucket, Key=entry.key)
    elif damage == "escaping-path":
        body = json.loads(manifest.to_json())
        body["files"][0]["path"] = "../../outside.bin"
        s3.put_object(Bucket=bucket, Key=mkey, Body=json.dumps(body).encode())
    plan = keyed_plan(tmp_path, remote.uri)
    with caplog.at_level("INFO", logger="neuronserve.stage"):
        result = stage_all(plan, s3_env)
    assert result.cache == "miss"
    assert os.listdir(result.artifacts_dir or "") == []
    if damage != "no-manifest":
        assert any(r.levelname == "WARNING" and remote.uri in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "outside.bin").exists()
    assert not os.path.exists((result.artifacts_dir or "") + ".partial")


def test_two_concurrent_writers_leave_one_complete_entry(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    remote = f"s3://{bucket}/cache/k1/"
    plans, results, contents = [], [], []
    for host in ("w1", "w2"):
        plan = keyed_plan(tmp_path, remote, host)
        result = stage_all(plan, s3_env)
        assert result.cache == "miss"
        contents.append(compile_into(result.artifacts_dir or "", host.upper(), size=2_000_000 + len(plans)))
        plans.append(plan)
        results.append(result)
    barrier = threading.Barrier(2)

    def write(i: int) -> None:
        barrier.wait()
        publish_artifacts(plans[i], results[i], s3_env)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    reader = stage_all(keyed_plan(tmp_path, remote, "reader"), s3_env)
    assert reader.cache == "hit"
    assert tree(reader.artifacts_dir or "") in contents  # exactly one writer's set, never a mix


def test_explicit_location_without_manifest_is_copied(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    s3.put_object(Bucket=bucket, Key="mine/compiled/model.pt", Body=b"precompiled")
    plan = keyed_plan(tmp_path, f"s3://{bucket}/mine/compiled/", mode="explicit")
    result = stage_all(plan, s3_env)
    assert result.cache == "hit"
    assert tree(result.artifacts_dir or "") == {"model.pt": b"precompiled"}

    empty = keyed_plan(tmp_path, f"s3://{bucket}/mine/empty/", host="b", mode="explicit")
    miss = stage_all(empty, s3_env)
    assert miss.cache == "miss"
    compile_into(miss.artifacts_dir or "", "E")
    publish_artifacts(empty, miss, s3_env)
    assert (
        stage_all(keyed_plan(tmp_path, f"s3://{bucket}/mine/empty/", host="c", mode="explicit"), s3_env).cache
        == "hit"
    )


def test_local_and_off_modes_touch_no_remote(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path
) -> None:
    """Modes `local` and `off` never reach S3, even with a remote URI at hand holding a valid entry
    (as a left-over NEURONSERVE_CACHE_URI would give): counted on the server, any bucket, any verb."""
    remote = f"s3://{bucket}/cache/k1/"
    built = tmp_path / "built"
    compile_into(str(built), "L")
    publish_dir(make_client(s3_env), str(built), parse_s3_uri(remote), options_from(s3_env))
    model = tmp_path / "model"
    model.mkdir()
    spec = ModelSpec(source="local", uri=str(model), local_path=str(model))
    local = make_plan(spec, ArtifactSpec(mode="local", local_dir=str(tmp_path / "art"), remote_uri=remote))
    off = make_plan(spec, ArtifactSpec(mode="off", remote_uri=remote))
    before = len(s3_server.requests)
    result = stage_all(local, s3_env)
    assert result.cache == "off"
    assert os.path.isdir(tmp_path / "art") and os.listdir(tmp_path / "art") == []  # not the entry
    compile_into(str(tmp_path / "art"), "M")
    publish_artifacts(local, result, s3_env)
    off_result = stage_all(off, s3_env)
    assert off_result == type(result)(str(model), None, "off")
    publish_artifacts(off, off_result, s3_env)
    assert s3_server.requests[before:] == []
