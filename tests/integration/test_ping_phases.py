"""/ping through the phases, observed on the shared server from its first second."""

from __future__ import annotations

import httpx
import pytest
from tests.support.server import Server

pytestmark = pytest.mark.integration


def test_front_answers_long_before_the_engine(server: Server) -> None:
    """The front answers /ping from its first second and all through the engine's load.

    What is checked does not follow from the fixture's staging hold: that hold only delays STAGING's
    end. The engine's own load (LOADING, after staging) is watched from outside: /ping answered 503
    LOADING again and again, over more than a second, before the first 200.
    """
    assert server.first_connect_s is not None and server.first_answer_s is not None
    # Listening right after the plan (before the server stack is imported); bounds leave room for a
    # loaded 2-core machine, where Python start-up alone can take most of a second.
    assert server.first_connect_s < 2.0, f"front took {server.first_connect_s:.2f} s to accept"
    assert server.first_answer_s < 6.0, f"front took {server.first_answer_s:.2f} s to answer /ping"
    trace = server.ping_trace
    assert trace[0][1] == 503 and trace[0][2] is not None, trace[:3]
    assert trace[0][2]["phase"] == "STAGING", trace[:3]  # up before the model was even fetched
    phases = [body["phase"] for _, status, body in trace if status == 503 and body]
    assert set(phases) <= {"STAGING", "LOADING"}
    loading = [t for t, status, body in trace if status == 503 and body and body["phase"] == "LOADING"]
    assert len(loading) >= 3, f"/ping answered only {len(loading)} time(s) while the engine loaded"
    ready_s = trace[-1][0]
    assert trace[-1][1] == 200
    assert ready_s - loading[0] > 1.0, f"the engine loaded in {ready_s - loading[0]:.2f} s: watched?"


def test_ping_shows_staging_progress_then_loading(server: Server) -> None:
    """The shared server stages its model from S3 (one GET held a few seconds): STAGING comes first."""
    phases = [body["phase"] for _, status, body in server.ping_trace if status == 503 and body]
    assert phases[0] == "STAGING", phases[:5]
    assert phases.index("LOADING") > phases.index("STAGING")
    assert "STAGING" not in phases[phases.index("LOADING") :], "went back to STAGING after LOADING"
    staging = [body for _, status, body in server.ping_trace if body and body["phase"] == "STAGING"]
    with_progress = [b["progress"] for b in staging if "progress" in b]
    assert with_progress, staging[:3]
    last = with_progress[-1]
    assert last["what"].startswith("model s3://integration-models/tiny/")
    assert last["total_bytes"] and 0 <= last["done_bytes"] <= last["total_bytes"]


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
