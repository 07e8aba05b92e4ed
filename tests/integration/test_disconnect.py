"""Clients that go away: the engine request is cancelled, the in-flight count drops, nothing leaks.

Measured with the engine's own metrics, read from its port: `vllm:num_requests_running` back to 0 and
`vllm:generation_tokens_total` barely moving. Generation is frozen (the EngineCore stopped) while the
clients connect and leave, so the check does not race a tiny model that finishes 400 tokens in well
under a second: had the front kept the engine request, the thawed engine would generate all of them.
"""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.support.server import Server, engine_core_pid, frozen
from tests.support.workers import wait_for

pytestmark = pytest.mark.integration

MAX_TOKENS = 400


def engine_metric(port: int, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                total += s.value
    return total


def front_in_flight(server: Server) -> float:
    for line in httpx.get(f"{server.url}/metrics", timeout=10).text.splitlines():
        if line.startswith("neuronserve_in_flight "):
            return float(line.split()[1])
    raise AssertionError("no neuronserve_in_flight in /metrics")


def raw_request(server: Server, body: dict[str, object]) -> socket.socket:
    """An HTTP/1.1 request sent on a bare socket (closing it is an abrupt client disconnect)."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    head = (
        f"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    sock.sendall(head + data)
    return sock


def test_client_disconnects_abort_the_engine_requests(server: Server, shared_env: dict[str, str]) -> None:
    port = int(shared_env["NEURONSERVE_ENGINE_PORT"])
    wait_for(lambda: engine_metric(port, "vllm:num_requests_running") == 0, 30, "an idle engine")
    tokens_before = engine_metric(port, "vllm:generation_tokens_total")
    bodies = [
        {"prompt": "hello", "max_tokens": MAX_TOKENS, "ignore_eos": True},
        {"prompt": "hello", "max_tokens": MAX_TOKENS, "ignore_eos": True, "stream": True},
        {"inputs": "hello", "parameters": {"max_new_tokens": MAX_TOKENS}, "stream": True},
    ]
    with frozen(engine_core_pid(server)):
        socks = [raw_request(server, b) for b in bodies]
        wait_for(lambda: front_in_flight(server) == len(bodies), 5, "the requests in flight")
        time.sleep(0.5)  # the engine's API process has them (it is not frozen)
        for s in socks:
            s.close()
        # the front notices at once and lets go of its engine connections
        wait_for(lambda: front_in_flight(server) == 0, 5, "the front's in-flight count back to 0")
        time.sleep(1.0)  # the engine's API process sees its connections close and aborts
    wait_for(lambda: engine_metric(port, "vllm:num_requests_running") == 0, 30, "engine running back to 0")
    wait_for(lambda: engine_metric(port, "vllm:num_requests_waiting") == 0, 30, "engine waiting back to 0")
    generated = engine_metric(port, "vllm:generation_tokens_total") - tokens_before
    # aborted right after the thaw: a few tokens at most, far from 3 x 400
    assert generated < MAX_TOKENS, f"the engine generated {generated:.0f} tokens for clients that left"
    log = server.log()
    assert log.count("status=499") >= len(bodies), "the access log does not show the clients leaving"
