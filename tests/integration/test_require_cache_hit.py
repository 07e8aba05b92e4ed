"""NEURONSERVE_REQUIRE_CACHE_HIT=true through a real `neuronserve serve --device neuron` (the Neuron plan,
run by vLLM on the CPU here since no plugin is installed) and the session's moto S3 server: a miss fails
before any engine starts (/ping never 200, FAILED while it answers, exit 1, the key, URI and
`neuronserve cache push` in the log); after a push the same start is a hit that stages and serves."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from tests.support.cli import neuronserve
from tests.support.server import ENGINE_PID, ServerPool, base_env, start_server

pytestmark = pytest.mark.after_shared_server(6)


def _env(tiny_model: Path, work: Path, s3_env: dict[str, str]) -> dict[str, str]:
    return base_env(
        tiny_model,
        work,
        SM_VLLM_MAX_MODEL_LEN="256",
        SM_VLLM_MAX_NUM_SEQS="4",
        SM_VLLM_TENSOR_PARALLEL_SIZE="1",
        SM_VLLM_DTYPE="float32",  # the Neuron default bfloat16 is not what this CPU engine runs
        NEURON_RT_VISIBLE_CORES="0",
        NEURONSERVE_INSTANCE_TYPE="ml.inf2.xlarge",
        NEURONSERVE_CACHE_URI="s3://integration-models/cache",
        NEURONSERVE_REQUIRE_CACHE_HIT="true",
        **s3_env,
    )


def test_miss_fails_before_the_engine_then_a_pushed_entry_serves(
    server_pool: ServerPool, s3_tiny_model: str, s3_env: dict[str, str], tiny_model: Path, tmp_path: Path
) -> None:
    server_pool.close()  # one engine at a time on this machine
    env = _env(tiny_model, tmp_path / "work", s3_env)
    plan = neuronserve(["plan", "--json", "--device", "neuron"], env)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    key = doc["cache_key"]
    assert doc["memory"]["fits"] is True  # the tiny model on an inf2.xlarge core

    server = start_server(env, tmp_path / "miss.log", device="neuron")
    phases: list[str] = []
    try:
        with httpx.Client(timeout=2.0) as client:
            deadline = time.monotonic() + 60
            while server.proc.poll() is None and time.monotonic() < deadline:
                try:
                    r = client.get(f"{server.url}/ping")
                except httpx.TransportError:
                    time.sleep(0.02)
                    continue
                assert r.status_code != 200
                phases.append(r.json()["phase"])
                time.sleep(0.02)
        code = server.proc.wait(timeout=30)
    finally:
        server.stop()  # a no-op once it exited; never leaves an engine behind when an assertion fails
    log = server.log()
    assert code == 1, log[-3000:]
    assert set(phases) <= {"STAGING", "FAILED"}
    assert key in log and "s3://integration-models/cache/" in log and "neuronserve cache push" in log
    assert not ENGINE_PID.search(log), "an engine was started on a required cache hit"
    assert not (tmp_path / "work" / "artifacts" / key).exists()

    built = tmp_path / "built"
    built.mkdir()
    (built / "model.pt").write_bytes(b"compiled graph stand-in")
    push = neuronserve(["cache", "push", str(built), "--key", key], env)
    assert push.returncode == 0, push.stderr

    server = start_server(env, tmp_path / "hit.log", device="neuron")
    try:
        server.wait_ready(240)
        r = httpx.post(f"{server.url}/invocations", json={"prompt": "hi", "max_tokens": 2}, timeout=60)
        assert r.status_code == 200, r.text + server.log()[-4000:]
        staged = tmp_path / "work" / "artifacts" / key / "model.pt"
        assert staged.read_bytes() == b"compiled graph stand-in"
        assert "compile cache hit" in server.log()
    finally:
        assert server.stop() == 0
