"""Engine stalls, provoked by freezing the engine's API process (SIGSTOP) on the shared server.

Marked to run after the other shared-server tests (a frozen and thawed engine is slow for a few
seconds), and before the lifecycle tests that end the shared server (tests/integration/conftest.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from tests.support.server import Server, assert_error, engine_core_pid, frozen

pytestmark = [pytest.mark.integration, pytest.mark.after_shared_server(1)]


@contextmanager
def frozen_api(server: Server) -> Iterator[None]:
    """The engine's API process frozen: nothing answers (then waits for a recovery)."""
    with frozen(server.engine_pid()):
        yield
    _wait_healthy(server)


def _wait_healthy(server: Server) -> None:
    """After a thaw: /ping 200 and a quick answer again (the engine needs a moment)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if httpx.get(f"{server.url}/ping").status_code == 200:
            r = httpx.post(f"{server.url}/invocations", json={"prompt": "hi", "max_tokens": 2}, timeout=60)
            if r.status_code == 200 and r.elapsed.total_seconds() < 2.0:
                return
        time.sleep(0.2)
    raise AssertionError("the engine did not recover within 60 s of SIGCONT")


@pytest.mark.parametrize("schema", ["openai", "tgi"])
def test_stream_that_stalls_ends_with_an_error_event(server: Server, schema: str) -> None:
    """A stream cannot change its 200 once sent: a stall must end it with an in-band error, not silently.

    The engine's EngineCore is frozen first, so its API server answers 200 and starts the stream but
    no token ever comes: a stall after the 200, whatever the speed of the machine (freezing after the
    first token raced a tiny model that finishes 400 tokens in well under a second).
    """
    if schema == "openai":
        body = {"prompt": "hello", "max_tokens": 400, "ignore_eos": True, "stream": True}
    else:
        body = {"inputs": "hello", "parameters": {"max_new_tokens": 400}, "stream": True}
    lines: list[str] = []
    with (
        frozen(engine_core_pid(server)),
        httpx.stream("POST", f"{server.url}/invocations", json=body, timeout=60) as r,
    ):
        assert r.status_code == 200
        lines += [line for line in r.iter_lines() if line.startswith("data:")]
    _wait_healthy(server)
    last = json.loads(lines[-1][len("data:") :])
    if schema == "openai":
        assert last["error"]["code"] == 504
        assert "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS" in last["error"]["message"]
    else:
        assert last["error_type"] == "incomplete_generation" and last["error"]


def test_504_when_the_engine_does_not_answer_in_time(server: Server) -> None:
    # Freeze the engine's API process: the front's 8 s deadline (SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS) hits.
    with frozen_api(server):
        t0 = time.monotonic()
        r = httpx.post(f"{server.url}/invocations", json={"prompt": "hi", "max_tokens": 2}, timeout=60)
        took = time.monotonic() - t0
        assert_error(r, 504)
        assert 7.0 < took < 20.0
        ping = httpx.get(f"{server.url}/ping", timeout=2)
        assert ping.elapsed.total_seconds() < 1.0  # /ping never waits on the engine
        # ...but turns 503 once the engine's /health has timed out HEALTH_TIMEOUTS_TOLERATED times
        # in a row (3 x (2 s timeout + 0.5 s interval) after the freeze)
        while ping.status_code != 503:
            assert time.monotonic() - t0 < 20.0, "/ping still 200 with the engine frozen for 20 s"
            time.sleep(0.2)
            ping = httpx.get(f"{server.url}/ping", timeout=2)
        assert ping.json()["detail"] == "engine health check failing"
        print(f"engine frozen: 504 after {took:.1f} s, /ping 503 by {time.monotonic() - t0:.1f} s")
        # /metrics does not hang on a silent engine: the front's series, and a line saying why the
        # engine's are missing, after at most ENGINE_SCRAPE_TIMEOUT_S (1 s)
        t0 = time.monotonic()
        m = httpx.get(f"{server.url}/metrics", timeout=10)
        assert m.status_code == 200 and time.monotonic() - t0 < 3.0
        assert "# engine metrics unavailable: no answer within" in m.text
        assert 'neuronserve_phase{phase="READY"} 1.0' in m.text and "vllm:" not in m.text
    # It recovers (frozen() waited for /ping 200 and a quick answer): requests succeed again.
    assert httpx.post(f"{server.url}/invocations", json={"prompt": "hi", "max_tokens": 2}).status_code == 200
