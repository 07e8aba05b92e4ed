"""/live through the real `neuronserve serve` (uvicorn, the gate, the lifecycle) before the stand-in
engine (tests/support/standin_engine): 200 in every phase that makes progress (STAGING, LOADING while
the stand-in "compiles" and /ping is 503, READY, DRAINING), 503 naming the check when the process is
wedged: staging stalled (the model's weights GET held by the moto server) and back to 200 when it
moves; the engine killed with nothing to restart it; and fast under saturation, as /ping is.

The loop-stall check needs a loop blocked on purpose: tests/integration/serve/test_watchdog.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.support.s3server import ServerControl
from tests.support.server import ENGINE_PID
from tests.support.standin_server import standin_server
from tests.support.tiny_model import upload_tiny_model

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BUCKET = "live-probe"
STAGE_STALL_S = 3.0
LIVE_BUDGET_S = 0.2  # generous for CI's 2 cores; an unloaded /live takes about 1 ms


def _probe(client: httpx.Client) -> tuple[int, dict[str, Any], int] | None:
    """(/live status, its body, /ping status); None while nothing listens."""
    try:
        live = client.get("/live")
        ping = client.get("/ping")
    except httpx.TransportError:
        return None
    return live.status_code, live.json(), ping.status_code


def _until(
    client: httpx.Client, proc: subprocess.Popen[bytes], log: Path, done: Any, timeout_s: float = 60
) -> list[tuple[int, dict[str, Any], int]]:
    """Probe until `done(status, body, ping)`; returns every answer on the way (the last one included)."""
    seen: list[tuple[int, dict[str, Any], int]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        answer = _probe(client)
        if answer is not None:
            seen.append(answer)
            if done(*answer):
                return seen
        time.sleep(0.05)
    raise AssertionError(f"{seen[-5:]}\n{log.read_text()[-3000:]}")


@pytest.fixture
def held_weights(s3_server: ServerControl) -> Iterator[tuple[str, threading.Event]]:
    uri = upload_tiny_model(s3_server.endpoint, BUCKET)
    release = threading.Event()
    s3_server.hold[f"/{BUCKET}/tiny/model.safetensors"] = release
    try:
        yield uri, release
    finally:
        release.set()


def test_live_through_every_phase_and_a_stalled_stage(
    tmp_path: Path, s3_server: ServerControl, held_weights: tuple[str, threading.Event]
) -> None:
    uri, release = held_weights
    with standin_server(
        tmp_path,
        ready=False,
        SM_VLLM_MODEL=uri,
        AWS_ENDPOINT_URL_S3=s3_server.endpoint,
        AWS_ACCESS_KEY_ID="testing-key-id",
        AWS_SECRET_ACCESS_KEY="testing-secret-value",
        AWS_REGION="us-east-1",
        NEURONSERVE_LIVE_STAGE_STALL_S=str(STAGE_STALL_S),
        STANDIN_WRITE_S="0.5",  # the stand-in "compiles" for 2.5 s: LOADING is watched
        STANDIN_HOLD_S="4",
    ) as server:
        proc, url, log = server.proc, server.url, server.log_path
        with httpx.Client(base_url=url, timeout=5) as client:
            # STAGING, the weights' GET held: live at first, then wedged on the stage check alone.
            staging = _until(client, proc, log, lambda status, body, ping: status == 503)
            assert staging[0][:1] == (200,) and staging[0][1]["phase"] == "STAGING", staging[0]
            _, body, ping = staging[-1]
            assert body["phase"] == "STAGING" and ping == 503
            assert body["failed"] == ["stage"] and body["checks"]["loop"] == "ok", body
            assert "NEURONSERVE_LIVE_STAGE_STALL_S=3" in body["checks"]["stage"]
            assert f"s3://{BUCKET}/tiny/" in body["checks"]["stage"]
            # The GET goes on: staging advances, live again; then LOADING (compiling, /ping 503) and READY.
            release.set()
            # READY in both answers: /live is asked just before /ping, so the answer that first sees /ping 200
            # may still carry a LOADING /live (the phase moved between the two requests).
            after = _until(
                client, proc, log, lambda status, body, ping: ping == 200 and body["phase"] == "READY"
            )
            moved = next(i for i, (status, _, _) in enumerate(after) if status == 200)
            assert all(status == 200 for status, _, _ in after[moved:]), after
            loading = [b for status, b, ping in after if b["phase"] == "LOADING" and ping == 503]
            assert len(loading) >= 3 and all(b["live"] for b in loading), after
            assert after[-1][:2] == (200, {"live": True, "phase": "READY", "checks": loading[0]["checks"]})
            # DRAINING: a request holds its slot while SIGTERM drains it; /live stays 200 to the end.
            held = threading.Thread(
                target=httpx.post,
                args=(f"{url}/invocations",),
                kwargs={"json": {"prompt": "standin-hold"}, "timeout": 30},
            )
            held.start()
            time.sleep(0.5)
            proc.send_signal(signal.SIGTERM)
            draining = _until(client, proc, log, lambda status, body, ping: body["phase"] == "DRAINING")
            assert draining[-1][0] == 200 and draining[-1][1]["live"], draining[-1]
            time.sleep(1.0)
            assert client.get("/live").status_code == 200
            held.join(timeout=30)
        assert proc.wait(timeout=30) == 0, log.read_text()[-3000:]


def _hold(url: str, results: list[int]) -> None:
    r = httpx.post(f"{url}/invocations", json={"prompt": "standin-hold"}, timeout=30)
    results.append(r.status_code)


def test_live_is_fast_under_saturation_then_503_when_the_engine_dies(tmp_path: Path) -> None:
    """Every concurrency slot taken and every connection held: /live answers at once, from the /ping
    reserve. Then the engine is SIGKILLed: one engine, nothing restarts it, /live is 503 on the engine
    check until the server has exited (non-zero)."""
    with standin_server(
        tmp_path,
        ready=False,
        NEURONSERVE_MAX_CONCURRENCY="2",
        NEURONSERVE_MAX_CONNECTIONS="16",
        STANDIN_HOLD_S="6",
    ) as server:
        proc, url, log = server.proc, server.url, server.log_path
        with httpx.Client(base_url=url, timeout=5) as client:
            _until(client, proc, log, lambda status, body, ping: ping == 200)
            results: list[int] = []
            holders = [threading.Thread(target=_hold, args=(url, results)) for _ in range(2)]
            for t in holders:
                t.start()
            time.sleep(0.5)
            assert client.post("/invocations", json={"prompt": "hi"}).status_code == 429  # slots taken
            idle = [httpx.Client(base_url=url, timeout=10) for _ in range(16)]
            try:
                for c in idle:
                    c.get("/version")  # opens and keeps one connection each: the bound is reached
                busy = httpx.get(f"{url}/v1/models", timeout=5)
                assert busy.status_code == 503 and "NEURONSERVE_MAX_CONNECTIONS" in busy.text
                for _ in range(5):
                    with httpx.Client(base_url=url, timeout=5) as fresh:  # a new connection each time
                        started = time.perf_counter()
                        live = fresh.get("/live")
                        took = time.perf_counter() - started
                    assert live.status_code == 200 and took < LIVE_BUDGET_S, (live.text, took)
            finally:
                for c in idle:
                    c.close()
            for t in holders:
                t.join(timeout=30)
            assert results == [200, 200]

            engine = int(ENGINE_PID.findall(log.read_text())[-1])
            os.kill(engine, signal.SIGKILL)
            answers: list[tuple[int, dict[str, Any]]] = []
            deadline = time.monotonic() + 10
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    r = client.get("/live")
                except httpx.TransportError:
                    break  # exiting: the port is closed
                answers.append((r.status_code, r.json()))
        assert proc.wait(timeout=15) == 1
        dead = [body for status, body in answers if status == 503]
        assert dead, answers[-3:]
        assert all(body["failed"] == ["engine"] for body in dead), dead
        assert "code -9" in dead[0]["checks"]["engine"], dead[0]
        assert not [a for a in answers[answers.index((503, dead[0])) :] if a[0] == 200]  # never live again
