"""stage/rangedget.py, the Python engine, against the real moto server: objects split into ranged GETs
of the part size land byte for byte, each is journaled once whole, a second run fetches nothing, and a
file that fails its check is never put at its final name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.s3.conftest import ServerControl
from tests.s3.helpers import put_tree, read_tree, sample_files

from neuronserve.errors import StageError
from neuronserve.stage.context import Batch, StageContext
from neuronserve.stage.paths import JOURNAL_NAME, parse_s3_uri
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.rangedget import download_objects
from neuronserve.stage.transfer import Journal, RemoteObject, list_prefix

pytestmark = pytest.mark.s3


def _listing(ctx: StageContext, bucket: str) -> list[RemoteObject]:
    return list_prefix(ctx.client(), parse_s3_uri(f"s3://{bucket}/m/"))


def _download(ctx: StageContext, batch_args: dict[str, Any]) -> int:
    objects = batch_args["objects"]
    with ProgressMeter("test", sum(o.size for o in objects), None) as meter:
        return download_objects(ctx, Batch(meter=meter, **batch_args))


def test_parts_are_ranged_gets_and_the_files_land_whole_once(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path
) -> None:
    files = sample_files(11)
    put_tree(s3, bucket, "m/", files)
    ctx = StageContext.from_environ(
        {**s3_env, "NEURONSERVE_S3_PART_MB": "1", "NEURONSERVE_S3_CONCURRENCY": "3"}
    )
    objects = _listing(ctx, bucket)
    staging = tmp_path / "model.partial"
    staging.mkdir()
    args = {"bucket": bucket, "objects": objects, "staging_dir": str(staging)}
    assert _download(ctx, args) == len(files)
    got = read_tree(str(staging))
    assert {k: v for k, v in got.items() if k != JOURNAL_NAME} == files
    # one GET per started MiB of each object; the empty one needs none
    parts = {f"m/{rel}": -(-len(data) // 2**20) for rel, data in files.items() if data}
    assert s3_server.object_gets(bucket) == parts
    assert Journal(str(staging)).load() == {o.rel: (o.size, o.etag) for o in objects}
    before = s3_server.object_gets(bucket)
    assert _download(ctx, args) == 0  # everything journaled and whole: nothing fetched again
    assert s3_server.object_gets(bucket) == before


def test_a_file_that_fails_its_check_never_reaches_its_final_name(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    put_tree(s3, bucket, "m/", {"good.bin": b"g" * 1000, "bad.bin": b"b" * 1000})
    ctx = StageContext.from_environ({**s3_env, "NEURONSERVE_S3_CONCURRENCY": "1"})
    objects = sorted(_listing(ctx, bucket), key=lambda o: o.rel != "good.bin")

    def verify(obj: RemoteObject, path: str) -> None:
        if obj.rel == "bad.bin":
            raise StageError(f"{obj.rel}: content does not match the manifest's SHA-256")

    staging = tmp_path / "entry.partial"
    staging.mkdir()
    with pytest.raises(StageError, match=r"bad\.bin: content does not match"):
        _download(ctx, {"bucket": bucket, "objects": objects, "staging_dir": str(staging), "verify": verify})
    assert not (staging / "bad.bin").exists()
    assert "bad.bin" not in Journal(str(staging)).load()
