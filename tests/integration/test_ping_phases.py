"""/ping through the phases, observed on the shared server from its first second."""

from __future__ import annotations

import httpx
import pytest
from tests.support.server import Server

pytestmark = pytest.mark.integration


def test_front_answers_long_before_the_engine(server: Server) -> None:
    assert server.first_connect_s is not None and server.first_answer_s is not None
    # Listening right after the plan (before the server stack is imported); bounds leave room for a
    # loaded 2-core machine, where Python start-up alone can take most of a second.
    assert server.first_connect_s < 2.0, f"front took {server.first_connect_s:.2f} s to accept"
    assert server.first_answer_s < 6.0, f"front took {server.first_answer_s:.2f} s to answer /ping"
    ready_s = server.ping_trace[-1][0]
    assert ready_s > server.first_answer_s + 5.0  # long before the engine
    phases = [body["phase"] for _, status, body in server.ping_trace if status == 503 and body]
    assert phases, "never saw a not-ready /ping: the engine cannot have been ready that fast"
    assert set(phases) <= {"STAGING", "LOADING"}
    assert "LOADING" in phases
    assert server.ping_trace[-1][1] == 200


def test_phase_changes_are_logged(server: Server) -> None:
    log = server.log()
    assert "phase STAGING -> LOADING" in log
    assert "phase LOADING -> READY" in log
    assert '"argv":' in log  # the resolved plan is logged at start


def test_invocation_before_ready_is_503(server: Server) -> None:
    assert server.not_ready_invocation is not None
    status, body = server.not_ready_invocation
    assert status == 503
    assert body["error"]["code"] == 503
    assert "not ready" in body["error"]["message"]


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_ready_ping_is_200_with_empty_body(server: Server, method: str) -> None:
    r = httpx.request(method, f"{server.url}/ping")
    assert r.status_code == 200
    assert r.content == b""
