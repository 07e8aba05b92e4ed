"""Fault injection on staging and publishing; each test says what the fault loses.

The answer must always be: nothing beyond the work in flight on the part that failed. Complete files
stay complete, a partial model is never at the path the engine loads, and a cache entry is complete
or absent. (Two publishers of one key: tests/s3/stage/test_cache.py::test_two_concurrent_writers_leave_one_
complete_entry. A killed stager: tests/s3/stage/test_resume_and_errors.py::test_killed_download_resumes_...)
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.s3.conftest import ServerControl, wait_for
from tests.s3.helpers import put_tree, read_tree, s3_model, sample_files
from tests.s3.killed import fetched_again
from tests.s3.stage.test_cache import compile_into, keyed_plan, tree
from tests.support.tcpproxy import TcpProxy
from tests.support.trees import tar_bytes

from neuronserve.errors import ConfigError, StageError
from neuronserve.host.facts import read_serving_properties
from neuronserve.launchplan import resolve_plan
from neuronserve.stage import stage_all
from neuronserve.stage.paths import JOURNAL_NAME, MANIFEST_NAME

pytestmark = pytest.mark.s3
ROOT = Path(__file__).resolve().parents[3]
# Both engines retry a dead endpoint (botocore 8 attempts x our 6; s5cmd -r 10) for longer than a
# test should wait: after this, the stager is killed, as a restarted container's would be.
GIVE_UP_S = 10.0
SRC = str(ROOT / "src")


def _child_env(s3_env: dict[str, str], **extra: str) -> dict[str, str]:
    return {**os.environ, **s3_env, "PYTHONPATH": os.pathsep.join([SRC, str(ROOT), *sys.path]), **extra}


def _stage_child(uri: str, dest: str, env: dict[str, str], **kw: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.s3.stage_child", uri, dest],
        env=env,
        cwd=str(ROOT),
        stderr=subprocess.PIPE,
        **kw,
    )


def test_s3_server_dies_mid_stage_then_the_next_start_refetches_no_complete_file(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path, engine: str
) -> None:
    """Lost: the bytes of the one file in flight. The stager retries, then fails (or is restarted);
    the next start (S3 back) fetches that file only, and nothing is ever at the model path before."""
    files = sample_files(3)
    files["zz-slow.bin"] = os.urandom(300_000)
    put_tree(s3, bucket, "m/", files)
    release = threading.Event()
    held = f"/{bucket}/m/zz-slow.bin"
    s3_server.hold[held] = release
    proxy = TcpProxy(int(s3_server.endpoint.rsplit(":", 1)[1]))
    dest = str(tmp_path / "model")
    env = _child_env(
        s3_env,
        AWS_ENDPOINT_URL_S3=proxy.endpoint,
        NEURONSERVE_S3_ENGINE=engine,
        NEURONSERVE_S3_CONCURRENCY="2",
    )
    child = _stage_child(f"s3://{bucket}/m/", dest, env)
    journal = Path(dest + ".partial") / JOURNAL_NAME
    try:
        complete = lambda: journal.exists() and len(journal.read_text().splitlines()) == len(files) - 1  # noqa: E731
        assert wait_for(complete, 60), (
            child.stderr.read().decode() if child.poll() is not None else "no progress"
        )  # type: ignore[union-attr]
        proxy.kill()  # the endpoint dies: connections reset, new ones refused
        t0 = time.monotonic()
        try:
            _, err = child.communicate(timeout=GIVE_UP_S)
            gave_up = True
        except subprocess.TimeoutExpired:
            # still retrying (s5cmd: 10 retries with backoff, minutes): the platform restarts the
            # container, as it would after a failed health check; the restart must resume
            child.send_signal(signal.SIGKILL)
            _, err = child.communicate(timeout=30)
            gave_up = False
        took = time.monotonic() - t0
    finally:
        release.set()
        s3_server.hold.pop(held, None)
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode != 0
    if gave_up:  # the stager's own retries ran out: its error names the URI
        assert f"s3://{bucket}/m/" in err.decode(errors="replace"), err[-2000:]
    assert not os.path.exists(dest)  # nothing at the path the engine loads
    print(f"{engine}: {'gave up' if gave_up else 'still retrying, killed'} {took:.1f} s after S3 died")
    before = s3_server.object_gets(bucket)
    stage_all(s3_model(f"s3://{bucket}/m/", dest), s3_env)
    after = s3_server.object_gets(bucket)
    assert fetched_again(before, after) == {"m/zz-slow.bin": 1}
    got = read_tree(dest)
    got.pop(MANIFEST_NAME)
    assert got == files


# The stager with a file-size limit: writes past it fail with EFBIG (SIGXFSZ ignored), as on a full disk.
LIMITED = (
    "import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20)); sys.argv = sys.argv[1:]; "
    "runpy.run_module('tests.s3.stage_child', run_name='__main__')"
)


def test_disk_fills_during_staging_is_a_clear_error_and_no_partial_model(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path, engine: str
) -> None:
    """RLIMIT_FSIZE makes every write past 1 MiB fail (EFBIG), mid-file. Lost: nothing complete; the
    model path never exists, so no engine can load half a model; a later start with room completes."""
    files = sample_files(4)  # one 3 MiB weight file: over the limit
    put_tree(s3, bucket, "m/", files)
    dest = str(tmp_path / "model")
    env = _child_env(s3_env, NEURONSERVE_S3_ENGINE=engine)
    child = subprocess.Popen(
        [sys.executable, "-c", LIMITED, "stage_child", f"s3://{bucket}/m/", dest],
        env=env,
        cwd=str(ROOT),
        stderr=subprocess.PIPE,
    )
    _, err = child.communicate(timeout=120)
    text = err.decode(errors="replace")
    assert child.returncode != 0
    assert "StageError: disk full while staging" in text and f"s3://{bucket}/m/" in text, text[-3000:]
    assert "NEURONSERVE_WORK_DIR" in text
    assert not os.path.exists(dest)
    stage_all(s3_model(f"s3://{bucket}/m/", dest), s3_env)
    got = read_tree(dest)
    got.pop(MANIFEST_NAME)
    assert got == files


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_signal_during_publish_leaves_the_entry_complete_or_absent(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path, sig: int
) -> None:
    """`neuronserve cache push` stopped while its files upload. Lost: that upload; the key has no
    manifest (absent: the next start is a miss and compiles), and the next publish makes it complete."""
    built = tmp_path / "built"
    files = compile_into(str(built), "T")
    env = _child_env(s3_env, NEURONSERVE_CACHE_URI=f"s3://{bucket}/cache")
    uploads = f"PUT /{bucket}/cache/k1/uploads/"
    release = threading.Event()
    s3_server.hold_prefix[uploads] = release
    child = subprocess.Popen(
        [sys.executable, "-m", "neuronserve", "cache", "push", str(built), "--key", "k1"],
        env=env,
        cwd=str(ROOT),
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        started = lambda: any(f"{m} {p}".startswith(uploads) for m, p, _ in list(s3_server.requests))  # noqa: E731
        assert wait_for(started, 60), "the upload never started"
        child.send_signal(sig)
        child.wait(30)
    finally:
        release.set()
        s3_server.hold_prefix.pop(uploads, None)
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stderr.close()  # type: ignore[union-attr]
        child.stdout.close()  # type: ignore[union-attr]
    assert child.returncode != 0
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="cache/k1/").get("Contents", [])]
    assert f"cache/k1/{MANIFEST_NAME}" not in keys  # never a manifest without its files
    reader = stage_all(keyed_plan(tmp_path, f"s3://{bucket}/cache/k1/", "reader"), s3_env)
    assert reader.cache == "miss"
    again = subprocess.run(
        [sys.executable, "-m", "neuronserve", "cache", "push", str(built), "--key", "k1"],
        env=env,
        cwd=str(ROOT),
        capture_output=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    hit = stage_all(keyed_plan(tmp_path, f"s3://{bucket}/cache/k1/", "reader2"), s3_env)
    assert hit.cache == "hit" and tree(hit.artifacts_dir or "") == files


@pytest.mark.parametrize("where", ["s3", "local"])
def test_truncated_model_tarball_names_the_file(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path, where: str
) -> None:
    """Lost: nothing; the model path is never created."""
    whole = tar_bytes({"config.json": b"{}", "model.safetensors": os.urandom(400_000)})
    cut = whole[: len(whole) // 2]
    assert gzip.decompress(whole)  # the uncut one is fine
    if where == "s3":
        s3.put_object(Bucket=bucket, Key="t/model.tar.gz", Body=cut)
        uri = f"s3://{bucket}/t/model.tar.gz"
    else:
        Path(tmp_path / "model.tar.gz").write_bytes(cut)
        uri = str(tmp_path / "model.tar.gz")
    dest = str(tmp_path / "model")
    plan = resolve_plan(
        {"SM_VLLM_MODEL": uri, "NEURONSERVE_WORK_DIR": str(tmp_path / "w"), **s3_env}, device="cpu"
    )
    with pytest.raises(StageError) as info:
        stage_all(plan, s3_env)
    assert "model.tar.gz" in str(info.value) and "not a readable .tar.gz" in str(info.value)
    assert plan.model.local_path and not os.path.exists(plan.model.local_path)
    assert not os.path.exists(dest)


def test_config_json_that_is_not_json_names_the_file(
    s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    """From S3 (read after staging) and local (read by the plan): lost nothing, no engine started."""
    put_tree(s3, bucket, "c/", {"config.json": b"{'model_type': llama", "model.safetensors": b"x" * 10})
    dest = str(tmp_path / "model")
    with pytest.raises(StageError) as info:
        stage_all(s3_model(f"s3://{bucket}/c/", dest), s3_env)
    assert "config.json" in str(info.value) and f"s3://{bucket}/c/" in str(info.value)
    local = tmp_path / "local-model"
    local.mkdir()
    (local / "config.json").write_bytes(b"\x00\x01 not json")
    with pytest.raises(ConfigError) as cfg:
        resolve_plan({"SM_VLLM_MODEL": str(local), "NEURONSERVE_WORK_DIR": str(tmp_path / "w")}, device="cpu")
    assert str(local / "config.json") in str(cfg.value)


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (b"option.model_id=/opt/ml/model\noption.tensor_parallel_degree 2\n", "line 2"),
        (b"option.dtype=bf16\n\xff\xfe\n", "not UTF-8"),
        (b"=value-without-key\n", "line 1"),
    ],
)
def test_malformed_serving_properties_names_the_file_and_line(
    tmp_path: Path, content: bytes, expect: str
) -> None:
    """A line we cannot read was silently skipped before: the user's setting was lost without a word."""
    (tmp_path / "serving.properties").write_bytes(content)
    with pytest.raises(ConfigError) as info:
        read_serving_properties(str(tmp_path))
    assert str(tmp_path / "serving.properties") in str(info.value) and expect in str(info.value)
    # the serve/plan command turns it into exit 2 with the message, no traceback
    proc = subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan"],
        env={**os.environ, "PYTHONPATH": SRC, "SM_MODEL_DIR": str(tmp_path), "NEURONSERVE_DEVICE": "cpu"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(ROOT),
    )
    assert proc.returncode == 2 and "serving.properties" in proc.stderr and "Traceback" not in proc.stderr
