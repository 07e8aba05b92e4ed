"""Compile once: with 2 replicas on a Neuron cache miss, replica 0 compiles and replica 1 starts only after
the artifacts are complete (the completion marker is there), then loads them instead of compiling.
On the next start (a hit) both start together and load.

The engine is a stand-in executable (tests/support/standin_engine) that "compiles" by writing artifact
files slowly, as the vllm-neuron plugin does into NEURON_COMPILED_ARTIFACTS; no vLLM, no lock needed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.support.server import free_port, free_port_run
from tests.support.standin_server import standin_env, standin_events

pytestmark = pytest.mark.integration


def _start(tmp: Path, events: Path, log: Path, **extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    settings = {
        "NEURONSERVE_DATA_PARALLEL": "2",
        "NEURON_RT_VISIBLE_CORES": "0-1",
        "NEURONSERVE_ENGINE_PORT": str(free_port_run(2)),
        "STANDIN_EVENTS": str(events),
        "STANDIN_WRITE_S": "0.4",  # a compile slow enough for replica 1 to be seen waiting
    }
    env = standin_env(tmp, port, **{**settings, **extra})
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "neuronserve", "serve", "--device", "neuron"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(tmp),
        )
    return proc, f"http://127.0.0.1:{port}"


def _until_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> list[dict[str, Any]]:
    """Poll /ping until 200; returns the 503 bodies seen on the way."""
    bodies: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            r = httpx.get(f"{url}/ping", timeout=2)
        except httpx.TransportError:
            time.sleep(0.05)
            continue
        if r.status_code == 200:
            return bodies
        bodies.append(r.json())
        time.sleep(0.1)
    raise AssertionError(log.read_text()[-3000:])


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def test_replica_1_loads_what_replica_0_compiled(tmp_path: Path) -> None:
    events, log = tmp_path / "events.jsonl", tmp_path / "serve.log"
    proc, url = _start(tmp_path, events, log)
    try:
        bodies = _until_ready(proc, url, log)
        # /ping lists each replica's phase while replica 0 compiles and replica 1 waits.
        waiting = [b for b in bodies if "replicas" in b and b["replicas"][1]["phase"] == "WAITING"]
        assert waiting, bodies
        assert waiting[0]["replicas"][0]["phase"] == "LOADING" and waiting[0]["replicas"][0]["cores"] == "0"
        answers = {
            httpx.post(f"{url}/invocations", json={"prompt": "hi"}).headers["x-neuronserve-replica"]
            for _ in range(2)
        }
        assert answers == {"0", "1"}
    finally:
        assert _stop(proc) == 0
    first = standin_events(events)
    starts = [e for e in first if e["event"] == "start"]
    assert [e["cores"] for e in starts] == ["0", "1"]
    compiled = [e for e in first if e["event"] == "compiled"]
    assert [e["cores"] for e in compiled] == ["0"]  # one compile, by replica 0
    assert starts[1]["t"] > compiled[0]["t"]
    assert starts[1]["marker"] is True and "model.neff" in starts[1]["files"]
    assert [e["cores"] for e in first if e["event"] == "loaded"] == ["1"]

    # Second start, same work dir: a hit. Both replicas start together and load; nobody compiles.
    events2 = tmp_path / "events2.jsonl"
    proc, url = _start(tmp_path, events2, log)
    try:
        _until_ready(proc, url, log)
    finally:
        assert _stop(proc) == 0
    second = standin_events(events2)
    assert sorted(e["cores"] for e in second if e["event"] == "loaded") == ["0", "1"]
    assert not [e for e in second if e["event"] == "compiled"]


def test_session_api_with_one_replica(tmp_path: Path) -> None:
    """The SageMaker session API behaves the same with a single engine (no data parallel)."""
    log = tmp_path / "serve.log"
    proc, url = _start(
        tmp_path,
        tmp_path / "events.jsonl",
        log,
        NEURONSERVE_DATA_PARALLEL="1",
        SAGEMAKER_ENABLE_STATEFUL_SESSIONS="true",
    )
    inv = f"{url}/invocations"
    try:
        _until_ready(proc, url, log)
        new = httpx.post(
            inv, json={"requestType": "NEW_SESSION"}, headers={"x-amzn-sagemaker-session-id": "NEW_SESSION"}
        )
        assert new.status_code == 200, new.text
        sid, _, expires = new.headers["x-amzn-sagemaker-new-session-id"].partition("; ")
        assert expires.startswith("Expires=") and expires.endswith("Z")
        used = httpx.post(inv, json={"prompt": "hi"}, headers={"x-amzn-sagemaker-session-id": sid})
        assert used.status_code == 200 and used.headers["x-neuronserve-replica"] == "0"
        close = httpx.post(inv, json={"requestType": "CLOSE"}, headers={"x-amzn-sagemaker-session-id": sid})
        assert close.status_code == 200 and close.headers["x-amzn-sagemaker-closed-session-id"] == sid
        gone = httpx.post(inv, json={"prompt": "hi"}, headers={"x-amzn-sagemaker-session-id": sid})
        assert gone.status_code == 400 and gone.json()["error"]["code"] == 400
    finally:
        assert _stop(proc) == 0
