"""SIGTERM drains without losing a request; an engine death fails fast. Runs last (it ends servers)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from neuronserve.front.sse import SSEParser
from tests.support.server import Server, ServerPool, base_env

pytestmark = pytest.mark.integration


def _stream(url: str, results: list[tuple[str, object]]) -> None:
    body = {"prompt": "hello", "max_tokens": 150, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{url}/invocations", json=body, timeout=120) as r:
        parser = SSEParser()
        events = [e for chunk in r.iter_raw() for e in parser.feed(chunk)] + parser.close()
    results.append(("stream", (r.status_code, events)))


def _plain(url: str, results: list[tuple[str, object]]) -> None:
    r = httpx.post(f"{url}/invocations", json={"prompt": "hello", "max_tokens": 150, "ignore_eos": True}, timeout=120)
    results.append(("plain", (r.status_code, r.json())))


def test_sigterm_drains_in_flight_requests(server: Server, server_pool: ServerPool) -> None:
    owned = server_pool.take("shared")
    assert owned is server
    results: list[tuple[str, object]] = []
    threads = [threading.Thread(target=_stream, args=(server.url, results)) for _ in range(3)]
    threads.append(threading.Thread(target=_plain, args=(server.url, results)))
    for t in threads:
        t.start()
    time.sleep(0.3)  # the requests are in flight
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    ping = httpx.get(f"{server.url}/ping", timeout=2)
    assert ping.status_code == 503 and ping.json()["phase"] == "DRAINING"
    late = httpx.post(f"{server.url}/invocations", json={"prompt": "hi"}, timeout=5)
    assert late.status_code == 503 and "draining" in late.json()["error"]["message"]
    code = server.proc.wait(timeout=30)
    for t in threads:
        t.join(timeout=30)
    assert code == 0
    assert len(results) == 4
    for kind, (status, payload) in results:  # type: ignore[misc]
        assert status == 200
        if kind == "stream":
            assert payload[-1] == "[DONE]"
            text_chunks = [json.loads(e) for e in payload[:-1]]
            assert any(c["choices"] and c["choices"][0]["finish_reason"] == "length" for c in text_chunks)
        else:
            assert payload["usage"]["completion_tokens"] == 150
    with pytest.raises(ProcessLookupError):
        os.kill(server.engine_pid(), 0)
    server.stop()


def test_engine_death_turns_ping_503_and_exits_nonzero(
    server_pool: ServerPool, tiny_model: Path, tmp_path: Path
) -> None:
    env = base_env(tiny_model, tmp_path / "work", SM_VLLM_MAX_MODEL_LEN="256")
    server = server_pool.get("victim", env)
    server_pool.take("victim")
    try:
        assert httpx.get(f"{server.url}/ping").status_code == 200
        os.kill(server.engine_pid(), signal.SIGKILL)  # the API process only, as an OOM kill would
        t0 = time.monotonic()
        status = 200
        while time.monotonic() - t0 < 2.0:
            try:
                r = httpx.get(f"{server.url}/ping", timeout=1)
            except httpx.TransportError:
                status = -1  # already gone: also not healthy
                break
            status = r.status_code
            if status == 503:
                assert r.json()["phase"] == "FAILED"
                break
            time.sleep(0.02)
        assert status in (503, -1)
        assert time.monotonic() - t0 < 1.0
        code = server.proc.wait(timeout=10)
        assert code != 0
        log = server.log()
        assert "the engine exited with code" in log and "  | " in log  # its last lines are printed
    finally:
        server.stop()
