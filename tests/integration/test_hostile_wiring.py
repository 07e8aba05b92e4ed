"""The limits built apart (gate, sequence charge, sessions, request ids, logs) working together in
the REAL server: what unit tests of each part cannot show.

`neuronserve serve` (uvicorn with the guarded protocol, the gate, the app) runs in front of the
stand-in engine with small limits and JSON logs. A request whose prompt is "standin-hold" keeps its
slot for STANDIN_HOLD_S at the stand-in, so the concurrency limit can be filled on purpose.
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from tests.support.standin_server import StandinServer, standin_server
from tests.support.workers import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MAX_CONCURRENCY = 8
BODY_TIMEOUT_S = 2.0
HOLD_S = 3.0
SETTINGS = {
    "NEURONSERVE_MAX_CONCURRENCY": str(MAX_CONCURRENCY),
    "NEURONSERVE_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
    "NEURONSERVE_MAX_HEADER_BYTES": "8192",
    "NEURONSERVE_MAX_SESSIONS": "3",
    "NEURONSERVE_LOG_FORMAT": "json",
    "SAGEMAKER_ENABLE_STATEFUL_SESSIONS": "true",
    "SAGEMAKER_MAX_PAYLOAD_IN_MB": "1",
    "STANDIN_HOLD_S": str(HOLD_S),
}
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandinServer]:
    with standin_server(tmp_path_factory.mktemp("wiring"), **SETTINGS) as server:
        yield server


def _metric(server: StandinServer, name: str) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert found, f"no {name} in /metrics"
    return float(found.group(1))


def _exchange(server: StandinServer, data: bytes, timeout_s: float) -> bytes:
    """What the server sends back to `data` on a fresh connection before closing or `timeout_s`."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout_s) as sock:
        sock.sendall(data)
        got = b""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0 and select.select([sock], [], [], left)[0]:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def _hold(server: StandinServer, rid: str, out: list[int]) -> None:
    body = {"model": "standin", "prompt": "standin-hold", "max_tokens": 1}
    r = httpx.post(f"{server.url}/v1/completions", json=body, headers={"x-request-id": rid}, timeout=30)
    out.append(r.status_code)


def test_every_refusal_echoes_the_id_and_leaves_nothing_in_flight(front: StandinServer) -> None:
    """Refusals of every kind (sequences 400, TGI 422, 404, 413, 408, 431, the gate's 429 and the
    sequence charge's 429, OpenAI and TGI) each echo the client's X-Request-Id where it could be
    read, and once the held requests end, neuronserve_in_flight is back to 0: no refusal leaks a slot."""
    refused: dict[str, httpx.Response] = {}
    with httpx.Client(base_url=front.url, timeout=10) as client:
        many = {"model": "standin", "prompt": ["hi"] * 64, "max_tokens": 1}
        for route in ("/v1/completions", "/invocations"):
            refused[f"sequences {route}"] = client.post(route, json=many, headers={"x-request-id": "seq-1"})
        tgi = {"inputs": ["a"] * 32, "parameters": {"best_of": 8, "do_sample": True}}
        refused["tgi"] = client.post("/", json=tgi, headers={"x-request-id": "seq-1"})
        refused["404"] = client.get("/nope", headers={"x-request-id": "seq-1"})
        refused["413"] = client.post(
            "/v1/completions", content=b"x" * (1024 * 1024 + 1), headers={**JSON, "x-request-id": "seq-1"}
        )
        bad = client.post("/v1/completions", content=b"{", headers={**JSON, "x-request-id": "seq-1"})
        refused["bad json"] = bad
        statuses = {k: r.status_code for k, r in refused.items()}
        assert statuses == {
            "sequences /v1/completions": 400,
            "sequences /invocations": 400,
            "tgi": 422,
            "404": 404,
            "413": 413,
            "bad json": 400,
        }, {k: r.text[:200] for k, r in refused.items()}
        assert all("NEURONSERVE_MAX_SEQUENCES_PER_REQUEST" in refused[k].text for k in statuses if "seq" in k)
        assert {r.headers.get("x-request-id") for r in refused.values()} == {"seq-1"}

        slow = _exchange(front, _post_head(100, "slow-1") + b"{", BODY_TIMEOUT_S + 3)
        assert slow.startswith(b"HTTP/1.1 408 ") and b"x-request-id: slow-1" in slow, slow[:300]
        big_header = b"GET /v1/models HTTP/1.1\r\nHost: f\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"
        huge = _exchange(front, big_header, 5)
        assert huge.startswith(b"HTTP/1.1 431 "), huge[:300]

        held: list[int] = []
        threads = [threading.Thread(target=_hold, args=(front, f"hold-{i}", held)) for i in range(6)]
        for t in threads:
            t.start()
        wait_for(lambda: _metric(front, "neuronserve_in_flight") == 6, 5, "6 requests in flight")
        four = {"model": "standin", "prompt": "hi", "max_tokens": 1, "n": 4}
        charged = client.post("/v1/completions", json=four, headers={"x-request-id": "charge-1"})
        assert charged.status_code == 429 and "NEURONSERVE_MAX_CONCURRENCY" in charged.text, charged.text
        assert charged.headers["x-request-id"] == "charge-1"
        listed = {"inputs": ["a"] * 4, "parameters": {"max_new_tokens": 1}}  # TGI: one engine call each
        tgi_charged = client.post("/", json=listed, headers={"x-request-id": "charge-2"})
        assert tgi_charged.status_code == 429 and tgi_charged.json()["error_type"] == "overloaded"
        assert tgi_charged.headers["x-request-id"] == "charge-2"
        more = [threading.Thread(target=_hold, args=(front, f"hold-{i}", held)) for i in range(6, 8)]
        for t in more:
            t.start()
        wait_for(lambda: _metric(front, "neuronserve_in_flight") == 8, 5, "8 requests in flight")
        full = client.post("/v1/completions", json={"prompt": "hi"}, headers={"x-request-id": "full-1"})
        assert full.status_code == 429 and full.headers["x-request-id"] == "full-1", full.text
        for t in threads + more:
            t.join(timeout=HOLD_S + 10)
        assert held == [200] * 8
        wait_for(lambda: _metric(front, "neuronserve_in_flight") == 0, 5, "in flight back to 0")
        assert _metric(front, 'neuronserve_rejected_total{reason="limit"}') >= 3


def _post_head(length: int, rid: str, extra: bytes = b"", path: bytes = b"/v1/completions") -> bytes:
    return (
        b"POST %s HTTP/1.1\r\nHost: front\r\ncontent-type: application/json\r\n"
        b"x-request-id: %s\r\ncontent-length: %d\r\n%s\r\n" % (path, rid.encode(), length, extra)
    )


def test_a_declared_oversized_body_is_413_at_once_and_never_invited(front: StandinServer) -> None:
    """A Content-Length over SAGEMAKER_MAX_PAYLOAD_IN_MB is refused from the header: 413 before any
    body byte, not 408 after the body timeout, and an `Expect: 100-continue` client is not told to
    send its 50 MiB ("100 Continue") first. (The connection is not closed by the server: closing
    with a client's body unread resets it, and a client sending its body at once would lose the 413.)"""
    session = b"x-amzn-sagemaker-session-id: NEW_SESSION\r\n"  # read by the session layer first
    for path, extra in (
        (b"/v1/completions", b""),
        (b"/v1/completions", b"expect: 100-continue\r\n"),
        (b"/invocations", session + b"expect: 100-continue\r\n"),
    ):
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", front.port), timeout=5) as sock:
            sock.sendall(_post_head(50 * 1024 * 1024, "big-1", extra, path))
            got = b""
            while b"}}" not in got and select.select([sock], [], [], 1.5)[0]:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                got += chunk
        assert got.startswith(b"HTTP/1.1 413 "), got[:200]
        assert b"SAGEMAKER_MAX_PAYLOAD_IN_MB" in got and b"x-request-id: big-1" in got
        assert time.monotonic() - started < 1.0  # answered at once, not after the body timeout


def test_expect_100_continue_is_served(front: StandinServer) -> None:
    """curl sends `Expect: 100-continue` with large bodies. The front answers it, reads the body and
    forwards the request without the expectation: the engine is never waited on for a 100."""
    body = json.dumps({"model": "standin", "prompt": "hi", "max_tokens": 1}).encode()
    with socket.create_connection(("127.0.0.1", front.port), timeout=5) as sock:
        sock.sendall(_post_head(len(body), "cont-1", b"expect: 100-continue\r\n"))
        assert sock.recv(1024).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(body)
        got = b""
        deadline = time.monotonic() + 5
        while b"text_completion" not in got and time.monotonic() < deadline:
            if not select.select([sock], [], [], 0.2)[0]:
                continue
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    assert got.startswith(b"HTTP/1.1 200 ") and b"text_completion" in got, got[:300]


def _session(client: httpx.Client, sid: str, kind: str) -> httpx.Response:
    headers = {"x-amzn-sagemaker-session-id": sid, "x-request-id": f"sess-{kind}"}
    return client.post("/invocations", json={"requestType": kind}, headers=headers)


def test_the_session_cap_is_429_through_the_real_server(front: StandinServer) -> None:
    """NEURONSERVE_MAX_SESSIONS=3: the 4th open is 429 naming the variable, with the id echoed;
    closing one lets the next open in."""
    with httpx.Client(base_url=front.url, timeout=10) as client:
        opened = [_session(client, "NEW_SESSION", "NEW_SESSION") for _ in range(3)]
        assert [r.status_code for r in opened] == [200] * 3, [r.text for r in opened]
        over = _session(client, "NEW_SESSION", "NEW_SESSION")
        assert over.status_code == 429 and "NEURONSERVE_MAX_SESSIONS" in over.text, over.text
        assert over.headers["x-request-id"] == "sess-NEW_SESSION" and over.headers["retry-after"] == "1"
        sid = opened[0].json()["session_id"]
        assert _session(client, sid, "CLOSE").status_code == 200
        assert _session(client, "NEW_SESSION", "NEW_SESSION").status_code == 200


def test_every_json_log_line_stays_one_json_object(front: StandinServer) -> None:
    """With NEURONSERVE_LOG_FORMAT=json, a path with an encoded newline and U+2028 and a request id
    with a C1 control byte leave every line of the log one JSON object, one access line each."""
    marker = f"forged{time.monotonic_ns()}"
    path = f"/v1/models%0A{marker}%E2%80%A8%0D%1B"
    r = httpx.get(f"{front.url}{path}", headers={"x-request-id": b"a\x85b"}, timeout=10)
    assert r.status_code == 404 and r.headers["x-request-id"] != "a\x85b"
    time.sleep(0.3)
    lines = front.log().splitlines()
    objects = [json.loads(line) for line in lines if line.startswith("{")]
    assert len(objects) == len([line for line in lines if line.strip()]), "a line that is not JSON"
    access = [o for o in objects if marker in o.get("message", "")]
    assert len(access) == 1 and access[0]["status"] == 404, access
    assert "\x85" not in front.log() and "\u2028" not in front.log()


_SMALL = b'{"model": "standin", "prompt": "hi", "max_tokens": 1}'
_POST = b"POST /v1/completions HTTP/1.1\r\nHost: f\r\ncontent-type: application/json\r\n"
_LIMIT = 1024 * 1024  # SAGEMAKER_MAX_PAYLOAD_IN_MB=1


def _at(size: int) -> bytes:
    """A completion body of exactly `size` bytes (padded in an extra field the front forwards)."""
    pad = size - len(b'{"model": "standin", "prompt": "hi", "max_tokens": 1, "pad": ""}')
    return b'{"model": "standin", "prompt": "hi", "max_tokens": 1, "pad": "%s"}' % (b"a" * pad)


def _chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


# (what, the bytes sent, the status line the answer starts with); the connection is closed after each
RAW_CASES = [
    (
        "body exactly at the limit",
        _POST + b"connection: close\r\ncontent-length: %d\r\n\r\n" % _LIMIT + _at(_LIMIT),
        200,
    ),
    (
        "chunked body exactly at the limit",
        _POST + b"connection: close\r\ntransfer-encoding: chunked\r\n\r\n" + _chunked(_at(_LIMIT)),
        200,
    ),
    ("one byte over the limit", _POST + b"content-length: %d\r\n\r\n" % (_LIMIT + 1) + _at(_LIMIT + 1), 413),
    (
        "chunked, one byte over",
        _POST + b"transfer-encoding: chunked\r\n\r\n" + _chunked(_at(_LIMIT + 1)),
        413,
    ),
    ("100 KB request line", b"GET /v1/models?" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: f\r\n\r\n", 400),
    ("raw 0xFF bytes in the path", b"GET /v1/\xff\xfe HTTP/1.1\r\nHost: f\r\n\r\n", 400),
    ("%FF%FE%0A in the path", b"GET /v1/%ff%fe%0a HTTP/1.1\r\nHost: f\r\nconnection: close\r\n\r\n", 404),
    ("NUL in a header value", b"GET /v1/models HTTP/1.1\r\nHost: f\r\nX-A: a\x00b\r\n\r\n", 400),
    ("NUL in a header name", b"GET /v1/models HTTP/1.1\r\nHost: f\r\nX-\x00A: b\r\n\r\n", 400),
    (
        "Content-Length and Transfer-Encoding",
        _POST + b"content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    ),
    ("negative Content-Length", _POST + b"content-length: -1\r\n\r\n", 400),
    (
        "3000 small headers",
        b"GET /v1/models HTTP/1.1\r\nHost: f\r\n"
        + b"".join(b"X-%d: a\r\n" % i for i in range(3000))
        + b"\r\n",
        431,
    ),
    (
        "a TLS ClientHello on the plain port",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 200,
        400,
    ),
    (
        "a websocket upgrade",
        b"GET /v1/models HTTP/1.1\r\nHost: f\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        403,
    ),
    ("the HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400),
    ("CONNECT", b"CONNECT evil:443 HTTP/1.1\r\nHost: evil:443\r\n\r\n", 400),
    ("OPTIONS *", b"OPTIONS * HTTP/1.1\r\nHost: f\r\nconnection: close\r\n\r\n", 404),
    ("dot segments to /metrics", b"GET /v1/../metrics HTTP/1.1\r\nHost: f\r\nconnection: close\r\n\r\n", 404),
]


@pytest.mark.parametrize(("what", "data", "status"), RAW_CASES, ids=[c[0] for c in RAW_CASES])
def test_odd_requests_get_a_clear_answer_and_ping_stays_fast(
    front: StandinServer, what: str, data: bytes, status: int
) -> None:
    got = _exchange(front, data, 2.0)  # closed by then, or its answer (keep-alive) is in
    assert got.startswith(b"HTTP/1.1 %d " % status), (what, got[:300])
    started = time.perf_counter()
    assert httpx.get(f"{front.url}/ping", timeout=5).status_code == 200
    assert time.perf_counter() - started < 0.5


def test_pipelined_requests_are_answered_in_order(front: StandinServer) -> None:
    one = _POST + b"content-length: %d\r\n\r\n" % len(_SMALL) + _SMALL
    ping = b"GET /ping HTTP/1.1\r\nHost: f\r\nconnection: close\r\n\r\n"
    got = _exchange(front, one * 3 + ping, 5.0)
    assert got.count(b"HTTP/1.1 200 ") == 4 and got.count(b"text_completion") == 3, got[:500]
    assert got.rindex(b"text_completion") < got.rindex(b"HTTP/1.1 200 ")  # /ping answered last


def test_a_chunked_body_trickled_past_the_body_timeout_is_408(front: StandinServer) -> None:
    """One 1-byte chunk every 0.5 s: each read is quick, the whole body is not. 408 and closed."""
    with socket.create_connection(("127.0.0.1", front.port), timeout=10) as sock:
        sock.sendall(_POST + b"transfer-encoding: chunked\r\n\r\n")
        started = time.monotonic()
        got = b""
        while time.monotonic() - started < BODY_TIMEOUT_S + 3 and not got:
            with contextlib.suppress(OSError):
                sock.sendall(b"1\r\n \r\n")
            if select.select([sock], [], [], 0.5)[0]:
                got = sock.recv(65536)
    assert got.startswith(b"HTTP/1.1 408 ") and b"connection: close" in got, got[:300]
    assert BODY_TIMEOUT_S - 0.5 <= time.monotonic() - started < BODY_TIMEOUT_S + 2
