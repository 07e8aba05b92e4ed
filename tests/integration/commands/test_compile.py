"""`neuronserve compile` as a Job runs it: the real command (a subprocess, the real plan for a Neuron
device, the real stager and publisher) with the stand-in engine (tests/support/standin_engine, which
"compiles" by writing graph files into NEURON_COMPILED_ARTIFACTS) and the session's moto S3 server.

A miss compiles and pushes (the entry's manifest names what the engine wrote), with no HTTP port
opened; a second run is a hit that exits at once without an engine; `serve` with
NEURONSERVE_REQUIRE_CACHE_HIT=true then starts from that entry, loading instead of compiling. A
failing compile is retried NEURONSERVE_COMPILE_RETRIES times, each from an empty directory, then exit 1
with the engine's last lines; SIGTERM stops the engine and publishes nothing.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import neuronserve
from tests.support.standin_server import standin_events, standin_server

from neuronserve.stage.paths import MANIFEST_NAME

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _said(done: subprocess.CompletedProcess[str]) -> str:
    """Its log (stdout) and its last words (stderr)."""
    return done.stdout + done.stderr


def _key(env: dict[str, str]) -> str:
    plan = neuronserve(["plan", "--json", "--device", "neuron"], env)
    assert plan.returncode == 0, plan.stderr
    return str(json.loads(plan.stdout)["cache_key"])


def _compile_until_the_engine_starts(env: dict[str, str]) -> subprocess.Popen[str]:
    """`neuronserve compile` started, once the stand-in engine has said it started (or 60 s passed)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuronserve", "compile", "--device", "neuron"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not standin_events(env["STANDIN_EVENTS"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc


def _entry(s3: Any, bucket: str, key: str) -> dict[str, Any] | None:
    try:
        body = s3.get_object(Bucket=bucket, Key=f"cache/{key}/{MANIFEST_NAME}")["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    return json.loads(body)  # type: ignore[no-any-return]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_miss_compiles_and_pushes_then_a_hit_exits_at_once_and_serve_loads_it(
    tmp_path: Path, s3: Any, bucket: str, compile_env: dict[str, str]
) -> None:
    env = {**compile_env, "STANDIN_WRITE_S": "0.3"}
    key = _key(env)
    proc = _compile_until_the_engine_starts(env)
    assert standin_events(env["STANDIN_EVENTS"]), "the engine never started"
    front_port = int(env["SAGEMAKER_BIND_TO_PORT"])
    assert not _listening(front_port)  # compiling, and no front: nothing on the serve port
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out[-3000:]
    assert (
        f"compile cache miss for key {key}" in out
        and f"compiled and pushed s3://{bucket}/cache/{key}/" in out
    )
    events = standin_events(env["STANDIN_EVENTS"])
    assert [e["event"] for e in events] == ["start", "compiled"]
    assert _gone(events[0]["pid"])  # the engine was stopped before the exit
    entry = _entry(s3, bucket, key)
    assert entry is not None
    pushed = sorted(f["path"] for f in entry["files"])
    assert pushed == [*(f"graph{i}.neff" for i in range(5)), "model.neff"]

    started = time.monotonic()
    again = neuronserve(
        ["compile", "--device", "neuron"], {**env, "NEURONSERVE_WORK_DIR": str(tmp_path / "w2")}
    )
    took = time.monotonic() - started
    assert again.returncode == 0, _said(again)
    assert f"compile cache hit for key {key}" in again.stdout and "nothing to compile" in again.stdout
    assert standin_events(env["STANDIN_EVENTS"]) == events  # no engine started
    assert took < 20, f"a hit took {took:.1f} s"
    assert _entry(s3, bucket, key) == entry  # and nothing written

    # The serving replicas: required hit, same settings; the stand-in loads what compile pushed.
    settings = {k: v for k, v in env.items() if k.startswith(("NEURONSERVE_CACHE_URI", "AWS_"))}
    (tmp_path / "serve").mkdir()
    with standin_server(tmp_path / "serve", NEURONSERVE_REQUIRE_CACHE_HIT="true", **settings) as server:
        assert "compile cache hit" in server.log()
    served = standin_events(tmp_path / "serve" / "standin-events.jsonl")
    assert [e["event"] for e in served] == ["start", "loaded"]


def test_a_failing_compile_is_retried_then_exits_1_with_the_engines_last_lines(
    tmp_path: Path, s3: Any, bucket: str, compile_env: dict[str, str]
) -> None:
    env = {**compile_env, "STANDIN_FAIL_COMPILES": "9", "NEURONSERVE_COMPILE_RETRIES": "2"}
    key = _key(env)
    failed = neuronserve(["compile", "--device", "neuron"], env)
    assert failed.returncode == 1, _said(failed)[-3000:]
    assert (
        "neuronserve compile: error: the compile failed 3 time(s) (NEURONSERVE_COMPILE_RETRIES=2)"
        in failed.stderr
    )
    assert "  | stand-in compiler: ERROR: graph0 failed to compile (failure 3)" in failed.stderr
    assert [e["event"] for e in standin_events(env["STANDIN_EVENTS"])] == ["start", "compile_failed"] * 3
    assert _entry(s3, bucket, key) is None

    # One failure, one retry: the retry starts from an empty directory and its compile is pushed.
    env["STANDIN_EVENTS"] = str(tmp_path / "events2.jsonl")
    ok = neuronserve(
        ["compile", "--device", "neuron"],
        {**env, "STANDIN_FAIL_COMPILES": "1", "NEURONSERVE_COMPILE_RETRIES": "1"},
    )
    assert ok.returncode == 0, _said(ok)[-3000:]
    events = standin_events(env["STANDIN_EVENTS"])
    assert [e["event"] for e in events] == ["start", "compile_failed", "start", "compiled"]
    assert events[2]["files"] == []  # the half-written graph of the failure was cleared
    assert "graph0 failed to compile (failure 1)" in ok.stdout  # the failure's lines, as a warning
    assert _entry(s3, bucket, key) is not None


def test_no_retry_when_retries_is_0(compile_env: dict[str, str]) -> None:
    env = {**compile_env, "STANDIN_FAIL_COMPILES": "1", "NEURONSERVE_COMPILE_RETRIES": "0"}
    failed = neuronserve(["compile", "--device", "neuron"], env)
    assert failed.returncode == 1
    assert "the compile failed 1 time(s) (NEURONSERVE_COMPILE_RETRIES=0)" in failed.stderr
    assert [e["event"] for e in standin_events(env["STANDIN_EVENTS"])] == ["start", "compile_failed"]


def test_sigterm_during_the_compile_stops_the_engine_and_publishes_nothing(
    tmp_path: Path, s3: Any, bucket: str, compile_env: dict[str, str]
) -> None:
    env = {**compile_env, "STANDIN_WRITE_S": "3"}  # a 15 s compile
    key = _key(env)
    proc = _compile_until_the_engine_starts(env)
    engine = standin_events(env["STANDIN_EVENTS"])[0]["pid"]
    time.sleep(1.0)  # mid-compile: a graph or two written
    stopped = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 143, out[-3000:]
    assert time.monotonic() - stopped < 15
    assert _gone(engine)
    assert "stopped: nothing was published" in out
    assert _entry(s3, bucket, key) is None
    assert not s3.list_objects_v2(Bucket=bucket, Prefix=f"cache/{key}/").get("Contents")
