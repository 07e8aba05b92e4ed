"""Slow and oversized clients against the REAL server: one client must not take the endpoint down.

The server is `neuronserve serve` itself (uvicorn with the guarded httptools protocol, the gate, the
lifecycle's settings) in front of the stand-in engine, started once for this file with small limits
so each case is provoked in seconds. Raw sockets on 127.0.0.1 play the hostile clients: they send
exactly the bytes a slow or oversized client would, which no HTTP client library does.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.standin_server import StandinServer, standin_server

from neuronserve.serve.connections import PING_RESERVE

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

HEADER_TIMEOUT_S = 2.0
BODY_TIMEOUT_S = 4.0
MAX_CONCURRENCY = 8
MAX_CONNECTIONS = 64
MAX_HEADER_BYTES = 8192
SETTINGS = {
    "NEURONSERVE_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
    "NEURONSERVE_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
    "NEURONSERVE_MAX_CONCURRENCY": str(MAX_CONCURRENCY),
    "NEURONSERVE_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
    "NEURONSERVE_MAX_HEADER_BYTES": str(MAX_HEADER_BYTES),
    "SAGEMAKER_MAX_PAYLOAD_IN_MB": "1",
}
BODY = b'{"prompt": "hi", "max_tokens": 1}'
PING_BUDGET_S = 0.2  # generous for CI's 2 cores; an unloaded /ping takes about 1 ms


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandinServer]:
    with standin_server(tmp_path_factory.mktemp("hostile"), **SETTINGS) as server:
        yield server


def _connect(server: StandinServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


@contextlib.contextmanager
def _sockets() -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    try:
        yield held
    finally:
        for sock in held:
            sock.close()
        time.sleep(0.2)  # the server sees them go before the next test counts connections


def _closed_within(sock: socket.socket, timeout_s: float) -> tuple[bool, bytes]:
    """(closed by the server within timeout_s, what it sent before closing)."""
    got = b""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([sock], [], [], left)
        if not readable:
            break
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True, got
        if not chunk:
            return True, got
        got += chunk
    return False, got


def _ping_s(client: httpx.Client) -> float:
    started = time.perf_counter()
    r = client.get("/ping")
    took = time.perf_counter() - started
    assert r.status_code == 200
    return took


def _post_head(length: int) -> bytes:
    return (
        b"POST /v1/completions HTTP/1.1\r\nHost: front\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % length
    )


def test_slow_bodies_hold_no_slot_and_get_408_after_the_body_timeout(front: StandinServer) -> None:
    """4x the concurrency limit in clients that send headers and one body byte: a normal request is
    still served (not 429), /ping stays fast, and each slow client gets 408 and a closed connection
    once NEURONSERVE_BODY_TIMEOUT_S has passed."""
    with _sockets() as slow, httpx.Client(base_url=front.url, timeout=10) as client:
        started = time.monotonic()
        for _ in range(MAX_CONCURRENCY * 4):
            sock = _connect(front)
            sock.sendall(_post_head(len(BODY)) + BODY[:1])
            slow.append(sock)
        time.sleep(0.5)  # every slow request has reached the gate
        r = client.post("/v1/completions", content=BODY, headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        assert max(_ping_s(client) for _ in range(10)) < PING_BUDGET_S
        for sock in slow:
            left = BODY_TIMEOUT_S + 5.0 - (time.monotonic() - started)
            closed, got = _closed_within(sock, max(left, 0.1))
            assert got.startswith(b"HTTP/1.1 408 "), got[:200]
            assert b"NEURONSERVE_BODY_TIMEOUT_S" in got and closed
        assert time.monotonic() - started >= BODY_TIMEOUT_S - 0.5  # not before the deadline


def test_slowloris_headers_are_closed_after_the_header_timeout(front: StandinServer) -> None:
    """Clients trickling their headers (a byte every 0.3 s), and one that sends nothing at all, are
    closed once NEURONSERVE_HEADER_TIMEOUT_S has passed; /ping meanwhile stays fast."""
    with _sockets() as slow, httpx.Client(base_url=front.url, timeout=10) as client:
        silent = _connect(front)
        slow.append(silent)
        for _ in range(20):
            sock = _connect(front)
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: front\r\nX-Slow: ")
            slow.append(sock)
        started = time.monotonic()
        open_ = list(slow)
        pings: list[float] = []
        while open_ and time.monotonic() - started < HEADER_TIMEOUT_S + 4.0:
            for sock in list(open_):
                try:
                    sock.sendall(b"a")
                except OSError:
                    open_.remove(sock)
                    continue
                closed, _ = _closed_within(sock, 0.0)
                if closed:
                    open_.remove(sock)
            pings.append(_ping_s(client))
            time.sleep(0.3)
        took = time.monotonic() - started
        assert not open_, f"{len(open_)} slow clients still open after {took:.1f} s"
        assert took >= HEADER_TIMEOUT_S - 0.5
        assert max(pings) < PING_BUDGET_S, pings


def _read_response(sock: socket.socket, timeout_s: float) -> bytes:
    _, got = _closed_within(sock, timeout_s)
    return got


def test_one_huge_header_is_refused_with_431_quickly(front: StandinServer) -> None:
    sock = _connect(front)
    with _sockets() as held:
        held.append(sock)
        started = time.monotonic()
        with contextlib.suppress(OSError):  # the server may close before it has read everything
            sock.sendall(b"GET /ping HTTP/1.1\r\nHost: front\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
        got = _read_response(sock, 5.0)
        assert got.startswith(b"HTTP/1.1 431 "), got[:200]
        assert b"NEURONSERVE_MAX_HEADER_BYTES" in got
        assert time.monotonic() - started < 2.0


def test_a_header_in_small_pieces_is_cut_off_at_the_limit(front: StandinServer) -> None:
    """4 MiB of one header in 1 KiB pieces (httptools joined them with `+=`: 3.4 s of the server's CPU,
    quadratic in the size): answered 431 once the limit is passed, counted as the bytes arrive, for
    little CPU, with /ping fast meanwhile. (What the client managed to send says little: the
    kernel's socket buffers hold megabytes.)"""
    cpu_before = _cpu_s(front.proc.pid)
    sent = 0
    answer = b""
    pings: list[float] = []
    stop = threading.Event()

    def ping_meanwhile() -> None:
        with httpx.Client(base_url=front.url, timeout=10) as client:
            while not stop.is_set():
                pings.append(_ping_s(client))
                time.sleep(0.02)

    pinger = threading.Thread(target=ping_meanwhile, daemon=True)
    with _sockets() as held:
        sock = _connect(front)
        held.append(sock)
        pinger.start()
        try:
            sock.sendall(b"GET /ping HTTP/1.1\r\nHost: front\r\nX-Big: ")
            deadline = time.monotonic() + 20.0
            while sent < 4 << 20 and time.monotonic() < deadline:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    answer = _read_response(sock, 2.0)
                    break
                try:
                    sock.sendall(b"a" * 1024)
                except OSError:
                    answer = _read_response(sock, 2.0)
                    break
                sent += 1024
        finally:
            waited = time.monotonic() + 5.0
            while len(pings) < 3 and time.monotonic() < waited:  # the cut may come before any ping
                time.sleep(0.01)
            stop.set()
            pinger.join(timeout=10)
    assert answer.startswith(b"HTTP/1.1 431 "), (sent, answer[:200])
    assert _cpu_s(front.proc.pid) - cpu_before < 1.0
    assert pings and max(pings) < PING_BUDGET_S, pings


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle_keep_alive(server: StandinServer) -> socket.socket:
    """A connection that asked /ping once and stays open (keep-alive), holding a connection."""
    sock = _connect(server)
    sock.sendall(b"GET /ping HTTP/1.1\r\nHost: front\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(4096)
        assert chunk, got
        got += chunk
    assert got.startswith(b"HTTP/1.1 200 "), got[:200]
    return sock


def test_open_connections_are_bounded_and_ping_keeps_answering(front: StandinServer) -> None:
    """NEURONSERVE_MAX_CONNECTIONS held by idle clients: another route gets 503 and a closed
    connection, /ping still answers 200 (from the reserve); past the reserve, a connection is closed
    as it is accepted."""
    with _sockets() as held:
        for _ in range(MAX_CONNECTIONS):
            held.append(_idle_keep_alive(front))
        over = _connect(front)
        held.append(over)
        over.sendall(b"GET /v1/models HTTP/1.1\r\nHost: front\r\n\r\n")
        closed, got = _closed_within(over, 5.0)
        assert got.startswith(b"HTTP/1.1 503 ") and closed, got[:300]
        assert b"NEURONSERVE_MAX_CONNECTIONS" in got
        with httpx.Client(base_url=front.url, timeout=10) as client:
            assert _ping_s(client) < PING_BUDGET_S  # a new connection, in the reserve
        for _ in range(PING_RESERVE):
            held.append(_idle_keep_alive(front))
        beyond = _connect(front)
        held.append(beyond)
        closed, got = _closed_within(beyond, 5.0)
        assert closed and got == b""
    with httpx.Client(base_url=front.url, timeout=10) as client:  # all released: served again
        assert client.get("/v1/models").status_code == 200


def test_the_access_log_has_one_line_per_request_whatever_the_path(front: StandinServer) -> None:
    """`%0A` in a path was a real newline in the text access log (a forged line); it is logged as
    the client encoded it, so one request is one line and a space cannot forge a field."""
    marker = f"forged{time.monotonic_ns()}"
    r = httpx.get(f"{front.url}/v1/models%0A{marker}%20status=200", timeout=10)
    assert r.status_code == 404
    time.sleep(0.3)
    lines = [line for line in front.log().splitlines() if marker in line]
    assert len(lines) == 1, lines
    assert "neuronserve.access" in lines[0] and "%0A" in lines[0] and " status=404 " in lines[0]


def test_request_ids_are_echoed_when_safe_and_replaced_when_not(front: StandinServer) -> None:
    with httpx.Client(base_url=front.url, timeout=10) as client:
        safe = "trace-1:a.b_C"
        r = client.post("/v1/completions", content=BODY, headers={"x-request-id": safe})
        assert r.status_code == 200 and r.headers["x-request-id"] == safe
        for bad in ("a b status=500", "x" * 129, "a/b", "é"):
            r = client.post("/v1/completions", content=BODY, headers={"x-request-id": bad.encode("latin-1")})
            assert r.status_code == 200
            echoed = r.headers["x-request-id"]
            assert echoed != bad and re.fullmatch(r"[0-9a-f]{32}", echoed), echoed
            time.sleep(0.1)
            assert f"replaced by {echoed}" in front.log()


def _nofile(pid: int) -> tuple[int, int]:
    """(soft, hard) open-file limits of process `pid`, from /proc."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open-file limit in /proc")


def test_the_server_raises_its_open_file_limit_to_the_hard_limit(tmp_path: Path) -> None:
    """Started with a soft limit of 256 (a container's default is often 1024), the server runs with
    its soft limit at the hard one and says so; connections past the old 256 are served."""
    with standin_server(tmp_path, nofile_soft=256) as server:
        soft, hard = _nofile(server.proc.pid)
        assert soft == hard > 256, (soft, hard)
        assert f"open-file limit raised from 256 to {hard}" in server.log()
        with _sockets() as held:
            for _ in range(300):
                held.append(_connect(server))
            with httpx.Client(base_url=server.url, timeout=10) as client:
                assert client.get("/v1/models").status_code == 200


def test_bad_limit_settings_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(AssertionError) as info, standin_server(tmp_path, NEURONSERVE_HEADER_TIMEOUT_S="0"):
        pass
    assert "NEURONSERVE_HEADER_TIMEOUT_S" in str(info.value)
