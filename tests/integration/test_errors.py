"""Every error status the front produces, with the one JSON error shape; engine errors pass through."""

from __future__ import annotations

import threading

import httpx
import pytest
from tests.support.server import Server, assert_error, engine_core_pid, frozen

pytestmark = pytest.mark.integration


def test_400_malformed_json_lists_the_accepted_shapes(server: Server) -> None:
    r = httpx.post(
        f"{server.url}/invocations", content=b'{"prompt": ', headers={"content-type": "application/json"}
    )
    msg = assert_error(r, 400)
    assert "malformed JSON" in msg and "messages" in msg and "inputs" in msg


def test_400_unknown_schema(server: Server) -> None:
    msg = assert_error(httpx.post(f"{server.url}/invocations", json={"text": "hi"}), 400)
    assert "unknown request schema" in msg and "prompt" in msg


def test_413_over_the_payload_limit(server: Server) -> None:
    big = {"prompt": "x" * (1024 * 1024 + 10)}  # the shared server's limit is 1 MB
    msg = assert_error(httpx.post(f"{server.url}/invocations", json=big, timeout=30), 413)
    assert "SAGEMAKER_MAX_PAYLOAD_IN_MB" in msg


def test_415_wrong_content_type(server: Server) -> None:
    r = httpx.post(f"{server.url}/invocations", content=b"hello", headers={"content-type": "text/plain"})
    assert_error(r, 415)


def test_422_invalid_tgi_parameters(server: Server) -> None:
    for params in ({"temperature": -1}, {"max_new_tokens": 0}, {"top_p": 1.5}, {"nonsense": 1}):
        r = httpx.post(f"{server.url}/invocations", json={"inputs": "hi", "parameters": params})
        assert_error(r, 422)


def test_engine_errors_keep_their_status_and_message(server: Server) -> None:
    r = httpx.post(f"{server.url}/invocations", json={"prompt": "hi", "max_tokens": -3}, timeout=30)
    assert r.status_code == 400
    assert "max_tokens" in r.json()["error"]["message"]


def test_429_over_the_concurrency_limit(server: Server) -> None:
    """The shared server allows 6 in flight: of 14 requests at once, 6 are served and the rest get 429.

    Generation is frozen (the engine's EngineCore stopped) while they arrive, so the first 6 stay in
    flight however fast the machine is; it resumes once the 8 refusals are back.
    """
    statuses: list[int] = []
    lock = threading.Lock()
    refused = threading.Semaphore(0)
    limits = httpx.Limits(max_connections=20, max_keepalive_connections=20)

    with httpx.Client(timeout=120, limits=limits) as client:

        def one() -> None:
            r = client.post(f"{server.url}/invocations", json={"prompt": "hello", "max_tokens": 20})
            with lock:
                statuses.append(r.status_code)
            if r.status_code == 429:
                assert r.json()["error"]["code"] == 429
                refused.release()

        threads = [threading.Thread(target=one) for _ in range(14)]
        with frozen(engine_core_pid(server)):
            for t in threads:
                t.start()
            for _ in range(8):
                assert refused.acquire(timeout=7), statuses  # within the 8 s engine deadline
        for t in threads:
            t.join(timeout=120)
    assert statuses.count(429) == 8, statuses
    assert statuses.count(200) == 6, statuses
    assert set(statuses) == {200, 429}
