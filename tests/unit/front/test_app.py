"""The front's own answers that need no engine: 405s, too-deep bodies, /health and /info shapes.

The app is driven in process (Starlette's TestClient); its engine client points at a closed port,
so anything that reached the engine would answer 503, never what these tests expect.
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from neuronserve.front.app import create_app
from neuronserve.front.gate import Gate
from neuronserve.front.proxy import make_client
from neuronserve.front.state import Phase, ServerState
from neuronserve.types import ServeOptions


@pytest.fixture
def client() -> TestClient:
    state = ServerState()
    state.move(Phase.LOADING)
    state.model_name, state.model_names, state.max_model_len = "m", ["m"], 512
    app = create_app(state, ServeOptions(max_concurrency=7), make_client("http://127.0.0.1:9", 5.0, 8))
    return TestClient(app)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/invocations"),
        ("PUT", "/generate"),
        ("DELETE", "/generate_stream"),
        ("GET", "/"),
        ("HEAD", "/invocations"),
        ("POST", "/info"),
        ("POST", "/metrics"),
        ("POST", "/live"),
    ],
)
def test_wrong_method_on_a_front_route_is_405_in_the_one_shape(
    client: TestClient, method: str, path: str
) -> None:
    r = client.request(method, path)
    assert r.status_code == 405
    if method != "HEAD":
        assert r.json()["error"]["type"] == "MethodNotAllowedError"


@pytest.mark.parametrize("path", ["/invocations", "/v1/completions", "/v1/chat/completions", "/tokenize"])
def test_too_deep_bodies_are_400_not_500(client: TestClient, path: str) -> None:
    r = client.post(
        path, content=b"[" * 100_000 + b"]" * 100_000, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and "nested too deeply" in r.json()["error"]["message"]


def test_generate_route_errors_are_tgi_shaped(client: TestClient) -> None:
    r = client.post("/generate", json={"inputs": "x", "parameters": {"watermark": True}})
    assert r.status_code == 422
    assert (
        r.json() == {"error": r.json()["error"], "error_type": "validation"}
        and "watermark" in r.json()["error"]
    )


def test_health_and_info(client: TestClient) -> None:
    r = client.get("/health")
    assert r.status_code == 503 and r.json()["error_type"] == "healthcheck"  # not READY yet
    info = client.get("/info").json()
    assert (info["model_id"], info["max_total_tokens"], info["max_input_tokens"]) == ("m", 512, 511)
    assert info["max_concurrent_requests"] == 7


def test_unknown_paths_are_404_in_the_one_shape_through_the_gate() -> None:
    state = ServerState()
    state.move(Phase.LOADING)
    state.move(Phase.READY)
    app = create_app(state, ServeOptions(), make_client("http://127.0.0.1:9", 5.0, 8))
    r = TestClient(Gate(app, state, 4)).get("/no/such/route", headers={"X-Request-Id": "r-404"})
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFoundError"
    assert r.headers["x-request-id"] == "r-404"


def test_live_answers_get_and_head_with_its_checks(client: TestClient) -> None:
    r = client.get("/live")
    assert r.status_code == 200
    assert r.json() == {
        "live": True,
        "phase": "LOADING",
        "checks": {"loop": "ok", "stage": "ok", "engine": "ok"},
    }
    head = client.head("/live")
    assert head.status_code == 200 and head.content == b""


def test_live_is_503_naming_the_check_and_outside_the_gate() -> None:
    """/live goes around the gate: no concurrency slot (0 free here), no phase refusal, no allowlist."""
    state = ServerState()
    state.supervisor_verdict = lambda: "the engine exited with code -9 and nothing restarts it"
    state.move(Phase.LOADING)
    app = create_app(state, ServeOptions(), make_client("http://127.0.0.1:9", 5.0, 8))
    gate = Gate(app, state, 1)
    assert gate.limiter.try_acquire(1)  # every slot taken
    r = TestClient(gate).get("/live")
    assert r.status_code == 503
    assert r.json()["failed"] == ["engine"]
    assert r.json()["checks"]["engine"] == "the engine exited with code -9 and nothing restarts it"
