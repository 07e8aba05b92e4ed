"""Data parallel with two real vLLM CPU engines (one CPU core each) behind one front: routing by
outstanding requests, sticky sessions, an engine SIGKILLed under load, and a drain.

ONE DP-2 server for the whole file (two engines do not fit beside the shared server: the pool stops it).
Load is held deterministically by freezing an engine's EngineCore (its API server still answers and
starts streams, no token comes), never by racing the tiny model. The kill test restores the server
(the killed replica comes back); the drain test ends it and runs last.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from tests.support.server import (
    Server,
    ServerPool,
    assert_error,
    base_env,
    engine_core_of,
    free_port_run,
    replica_pids,
)

pytestmark = [pytest.mark.integration, pytest.mark.after_shared_server(5)]

SESSION_TTL_S = 8
DP_SETTINGS = {
    "SM_VLLM_MAX_MODEL_LEN": "512",
    "SM_VLLM_MAX_NUM_SEQS": "8",
    # bfloat16 selects vLLM's AMX attention where the CPU reports AMX; on this VM (forked from a
    # snapshot) the first generation then dies with SIGILL. float32 avoids AMX (the tiny model is fast).
    "SM_VLLM_DTYPE": "float32",
    "NEURONSERVE_DATA_PARALLEL": "2",
    "SAGEMAKER_ENABLE_STATEFUL_SESSIONS": "true",
    "SAGEMAKER_SESSIONS_EXPIRATION": str(SESSION_TTL_S),
    "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "60",
    "NEURONSERVE_DRAIN_GRACE_S": "20",
}
SMALL = {"prompt": "hi", "max_tokens": 2}
NEW = {"x-amzn-sagemaker-session-id": "NEW_SESSION"}
SESSION_ID = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
EXPIRES = re.compile(r"^Expires=\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


@pytest.fixture(scope="module")
def dp_env(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    env = base_env(tiny_model, tmp_path_factory.mktemp("dp-work"), **DP_SETTINGS)
    env["NEURONSERVE_ENGINE_PORT"] = str(free_port_run(2))  # replica 1 listens on the next port
    return env


@pytest.fixture
def dp(server_pool: ServerPool, dp_env: dict[str, str]) -> Server:
    # These tests use no sampling extras (logprobs, top-k...): no inductor warm-up, one plain request
    # per replica so the first test does not pay the first-request cost.
    server = server_pool.get("dp2", dp_env, ready_timeout_s=300.0, warm=False)
    for port in (_engine_port(server), _engine_port(server) + 1):
        warm(port)
    return server


def warm(engine_port: int) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{engine_port}", timeout=120.0) as client:
        model = client.get("/v1/models").json()["data"][0]["id"]
        r = client.post("/v1/completions", json={"model": model, **SMALL})
        assert r.status_code == 200, r.text


def outstanding(server: Server) -> dict[int, int]:
    """The front's per-replica count of unfinished requests, from /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return {
        int(s.labels["replica"]): int(s.value)
        for f in text_string_to_metric_families(text)
        if f.name == "neuronserve_replica_outstanding"
        for s in f.samples
    }


def replica_of(r: httpx.Response) -> int:
    return int(r.headers["x-neuronserve-replica"])


def core(server: Server, index: int) -> int:
    return engine_core_of(replica_pids(server)[index])


def open_session(server: Server) -> tuple[str, int]:
    r = httpx.post(f"{server.url}/invocations", json={"requestType": "NEW_SESSION"}, headers=NEW, timeout=30)
    assert r.status_code == 200, r.text
    sid, _, expires = r.headers["x-amzn-sagemaker-new-session-id"].partition("; ")
    assert SESSION_ID.match(sid) and EXPIRES.match(expires), r.headers
    return sid, replica_of(r)


def test_load_spreads_by_outstanding_requests(dp: Server) -> None:
    """Both engines frozen: 4 streams split 2/2. Thaw one: its streams end, the frozen one still holds 2
    open streams, so the next requests all go to the thawed replica (plain round robin would send half
    of them to the frozen one, where they would hang)."""
    body = {"prompt": "hello", "max_tokens": 8, "ignore_eos": True, "stream": True}
    with httpx.Client(base_url=dp.url, timeout=60) as client, ExitStack() as stack:
        cores = {i: core(dp, i) for i in (0, 1)}
        thaw = {i: stack.enter_context(_frozen_until_exit(cores[i])) for i in (0, 1)}
        streams = []
        for _ in range(4):
            resp = stack.enter_context(client.stream("POST", "/invocations", json=body))
            assert resp.status_code == 200
            streams.append(resp)
        placed = [replica_of(s) for s in streams]
        assert sorted(placed) == [0, 0, 1, 1], placed
        free = placed[0] ^ 1
        thaw[free].set()  # let the streams on `free` finish
        for s in streams:
            if replica_of(s) == free:
                assert "[DONE]" in s.read().decode()
        # The client has the last byte a moment before the server's request ends: wait for the count.
        assert _wait_for(lambda: outstanding(dp) == {free: 0, free ^ 1: 2}, 10), outstanding(dp)
        quick = [client.post("/invocations", json=SMALL, timeout=30) for _ in range(3)]
        assert [q.status_code for q in quick] == [200, 200, 200]
        assert [replica_of(q) for q in quick] == [free, free, free]
        thaw[free ^ 1].set()
        for s in streams:
            if replica_of(s) != free:
                assert "[DONE]" in s.read().decode()
    # Idle again: ties go round robin.
    spread = {replica_of(httpx.post(f"{dp.url}/invocations", json=SMALL, timeout=30)) for _ in range(2)}
    assert spread == {0, 1}


class _Thaw:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.done = False

    def set(self) -> None:
        if not self.done:
            self.done = True
            os.kill(self.pid, signal.SIGCONT)


class _frozen_until_exit:
    """SIGSTOP now; SIGCONT on `.set()` or at the latest when the block ends."""

    def __init__(self, pid: int) -> None:
        self.thaw = _Thaw(pid)

    def __enter__(self) -> _Thaw:
        os.kill(self.thaw.pid, signal.SIGSTOP)
        return self.thaw

    def __exit__(self, *exc: object) -> None:
        self.thaw.set()


def test_sessions_stick_close_and_expire(dp: Server) -> None:
    sid, home = open_session(dp)
    url = f"{dp.url}/invocations"
    for _ in range(4):  # without the session these would alternate replicas
        r = httpx.post(url, json=SMALL, headers={"x-amzn-sagemaker-session-id": sid}, timeout=30)
        assert r.status_code == 200 and replica_of(r) == home, r.text
    closed = httpx.post(url, json={"requestType": "CLOSE"}, headers={"x-amzn-sagemaker-session-id": sid})
    assert closed.status_code == 200 and closed.headers["x-amzn-sagemaker-closed-session-id"] == sid
    after = httpx.post(url, json=SMALL, headers={"x-amzn-sagemaker-session-id": sid}, timeout=30)
    assert "unknown or expired session" in assert_error(after, 400)
    assert_error(httpx.post(url, json=SMALL, headers={"x-amzn-sagemaker-session-id": "no-such-id"}), 400)
    assert_error(httpx.post(url, json={"requestType": "REOPEN"}, headers=NEW), 400)

    short, _ = open_session(dp)
    time.sleep(SESSION_TTL_S + 0.5)
    expired = httpx.post(url, json=SMALL, headers={"x-amzn-sagemaker-session-id": short}, timeout=30)
    assert "unknown or expired session" in assert_error(expired, 400)


def test_metrics_per_replica(dp: Server) -> None:
    """/metrics: each replica's engine metrics with a replica label (one valid exposition), and the
    front's per-replica counts."""
    from prometheus_client.parser import text_string_to_metric_families

    before = httpx.get(f"{dp.url}/metrics", timeout=10)
    assert before.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(before.text)}
    engine = [f for name, f in families.items() if name.startswith("vllm:") and f.samples]
    assert engine, sorted(families)
    assert {s.labels["replica"] for s in engine[0].samples} == {"0", "1"}
    routed = {s.labels["replica"]: s.value for s in families["neuronserve_replica_requests"].samples}
    r = httpx.post(f"{dp.url}/invocations", json=SMALL, timeout=30)
    after = text_string_to_metric_families(httpx.get(f"{dp.url}/metrics", timeout=10).text)
    counts = {
        s.labels["replica"]: s.value
        for f in after
        if f.name == "neuronserve_replica_requests"
        for s in f.samples
    }
    assert counts[str(replica_of(r))] == routed[str(replica_of(r))] + 1


def test_engine_killed_under_load(dp: Server) -> None:
    """SIGKILL replica 1's engine while 4 clients send requests and /ping is polled: no request fails
    (those that had not reached it are retried on replica 0), /ping stays 200, replica 1's sessions
    close, and replica 1 is restarted on the same cores after its backoff and serves again."""
    sessions = [open_session(dp) for _ in range(2)]
    assert {home for _, home in sessions} == {0, 1}
    statuses: list[int] = []
    refused: list[str] = []  # what a request that did not get 200 was told, with its time
    pings: list[int] = []
    stop = threading.Event()

    def client_loop() -> None:
        with httpx.Client(base_url=dp.url, timeout=60) as c:
            while not stop.is_set():
                r = c.post("/invocations", json={**SMALL, "max_tokens": 8})
                statuses.append(r.status_code)
                if r.status_code != 200:
                    refused.append(f"{time.time():.3f} {r.status_code} {r.text[:300]}")

    def ping_loop() -> None:
        with httpx.Client(base_url=dp.url, timeout=5) as c:
            while not stop.is_set():
                pings.append(c.get("/ping").status_code)
                time.sleep(0.05)

    victim = replica_pids(dp)[1]
    threads = [threading.Thread(target=client_loop) for _ in range(4)] + [threading.Thread(target=ping_loop)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        restarted = _wait_for(lambda: replica_pids(dp).get(1) not in (None, victim), 15)
        restart_s = time.monotonic() - killed_at
        time.sleep(2.0)  # load continues on replica 0 while replica 1 loads
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert restarted, dp.log()[-3000:]
    assert restart_s < 10, restart_s  # first backoff is 1 s (plus the 100 ms poll)
    assert statuses and set(statuses) == {200}, (refused, dp.log()[-4000:])
    assert pings and set(pings) == {200}, pings
    for sid, home in sessions:
        r = httpx.post(f"{dp.url}/invocations", json=SMALL, headers={"x-amzn-sagemaker-session-id": sid})
        if home == 1:
            assert_error(r, 400)
        else:
            assert r.status_code == 200 and replica_of(r) == 0
    # Back: replica 1 READY again and taking requests.
    assert _wait_for(lambda: "replica 1 READY" in dp.log().rsplit("replica 1 started", 1)[-1], 240)
    warm(_engine_port(dp) + 1)
    seen = {replica_of(httpx.post(f"{dp.url}/invocations", json=SMALL, timeout=30)) for _ in range(4)}
    assert seen == {0, 1}


def test_drain_loses_nothing(server_pool: ServerPool, dp: Server) -> None:
    """SIGTERM with a stream open on each replica: /ping turns 503, both streams finish whole, exit 0."""
    server = server_pool.take("dp2")
    assert server is not None
    body = {
        "prompt": "hello",
        "max_tokens": 16,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.Client(base_url=server.url, timeout=60) as client, ExitStack() as stack:
        thaws = [stack.enter_context(_frozen_until_exit(core(server, i))) for i in (0, 1)]
        streams = [stack.enter_context(client.stream("POST", "/invocations", json=body)) for _ in range(2)]
        assert sorted(replica_of(s) for s in streams) == [0, 1]
        server.proc.send_signal(signal.SIGTERM)
        assert _wait_for(lambda: client.get("/ping").status_code == 503, 10)
        for t in thaws:
            t.set()
        texts = [s.read().decode() for s in streams]
    for text in texts:  # a thawed engine may send several tokens per event: count them by usage
        events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
        assert events[-1]["usage"]["completion_tokens"] == 16 and text.rstrip().endswith("[DONE]"), text[
            -500:
        ]
    assert server.stop() == 0
    assert "drained: no request in flight" in server.log()


def _engine_port(server: Server) -> int:
    m = re.search(r"replica 0 started: pid \d+, cores \S+, port (\d+)", server.log())
    assert m
    return int(m.group(1))


def _wait_for(cond: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False
