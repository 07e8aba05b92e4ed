"""The probe door, as a thread (serve/probedoor.py) and as a process of its own (serve/doorprocess.py:
each test runs both kinds where both must hold), on a real socket in front of the real front (app,
gate) on the server's own uvicorn (serve/frontstack.py QuietServer, serve/listener.py config), on
uvloop and on asyncio's loop. A test-only route blocks the event loop with a synchronous sleep, as a
saturated or wedged loop would: /ping and /live still answer at once, from the door, while a request
the door hands over waits for the loop. The door's bytes are the loop's; a handed-over connection
keeps its bytes (a long head too) and its header deadline; the door's connections count against the
connection bound. What only the process kind adds: test_doorprocess.py."""

from __future__ import annotations

import time

import pytest
from tests.support.doorserver import (
    LOOPS,
    PING,
    connect,
    door_server,
    exchange,
    read_response,
    read_response_or_empty,
    ready_state,
    status,
    without_date,
)

from neuronserve.front.state import Phase, ServerState
from neuronserve.serve.connections import PING_RESERVE, ConnectionLimits

KINDS = ("thread", "process")

pytestmark = pytest.mark.integration  # uvicorn on a real port


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("kind", KINDS)
def test_probes_answer_while_the_loop_is_blocked_and_other_requests_wait_for_it(loop: str, kind: str) -> None:
    with door_server(ready_state(), loop, kind=kind) as port, connect(port) as blocker, connect(port) as kept:
        blocker.sendall(b"GET /test-only/block HTTP/1.1\r\nHost: t\r\n\r\n")
        time.sleep(0.3)  # the loop sleeps now
        ping, took = exchange(port, PING)
        assert status(ping) == 200 and took < 0.5, (ping, took)
        for _ in range(2):  # a kept connection stays with the door
            t0 = time.monotonic()
            kept.sendall(b"GET /live HTTP/1.1\r\nHost: t\r\n\r\n")
            live = read_response(kept)
            assert status(live) == 200 and b'"live":true' in live and time.monotonic() - t0 < 0.5
        handed, waited = exchange(
            port, b"GET /ping?from=loop HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        )
        assert status(handed) == 200 and waited > 0.5  # served by the loop, once it ran again
        assert status(read_response_or_empty(blocker)) == 204


def test_without_the_door_a_probe_waits_for_the_blocked_loop() -> None:
    """NEURONSERVE_PROBE_THREAD=false (serve/frontstack.py passes no door): the loop answers /ping."""
    with door_server(ready_state(), "uvloop", door_on=False) as port, connect(port) as blocker:
        blocker.sendall(b"GET /test-only/block HTTP/1.1\r\nHost: t\r\n\r\n")
        time.sleep(0.3)
        ping, took = exchange(port, PING)
        assert status(ping) == 200 and took > 1.0


@pytest.mark.parametrize("phase", ["READY", "LOADING"])
@pytest.mark.parametrize("path", [b"/ping", b"/live"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_door_answers_the_bytes_the_loop_answers(phase: str, path: bytes, kind: str) -> None:
    state = ready_state(lambda: 100.0) if phase == "READY" else ServerState(lambda: 100.0)
    if phase == "LOADING":
        state.move(Phase.LOADING)
    with door_server(state, "uvloop", kind=kind) as port:
        head = b"GET " + path + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
        by_door, _ = exchange(port, head + b"\r\n")
        by_loop, _ = exchange(port, head + b"Content-Length: 0\r\n\r\n")  # a body header: handed over
    assert status(by_door) == (503 if (phase, path) == ("LOADING", b"/ping") else 200)
    assert without_date(by_door) == without_date(by_loop)
    assert b"\r\ndate: " in by_door and b"\r\nserver: uvicorn\r\n" in by_door


@pytest.mark.parametrize("kind", KINDS)
def test_a_handed_over_connection_keeps_its_bytes_and_pipelined_requests(kind: str) -> None:
    with door_server(ready_state(), "uvloop", kind=kind) as port, connect(port) as conn:
        conn.sendall(b"GE")  # undecided: the door reads on
        time.sleep(0.2)
        conn.sendall(b"T /ping?x=1 HTTP/1.1\r\nHost: t\r\n\r\n")
        assert status(read_response(conn)) == 200  # "GE" reached the loop's parser first
        conn.sendall(b"GET /live HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n")
        assert status(read_response(conn)) == 200
        nope = read_response(conn)
        assert status(nope) == 404 and b"no route" in nope
        with connect(port) as piped:  # a probe, then a request for the loop, in one write
            piped.sendall(PING.replace(b"close", b"keep-alive") + b"GET /info HTTP/1.1\r\nHost: t\r\n\r\n")
            assert status(read_response(piped)) == 200
            assert status(read_response(piped)) == 200


@pytest.mark.parametrize("kind", KINDS)
def test_the_header_deadline_counts_from_the_doors_accept(kind: str) -> None:
    limits = ConnectionLimits(header_timeout_s=1.0)
    with (
        door_server(ready_state(), "uvloop", limits, kind=kind) as port,
        connect(port) as slow,
        connect(port) as late,
    ):
        t0 = time.monotonic()
        slow.sendall(b"GET /pi")  # a probe's beginning, never finished: the door closes it
        time.sleep(0.6)
        late.sendall(b"P")  # not a probe: handed over with 0.4 s of its deadline left
        assert late.recv(100) == b"" and time.monotonic() - t0 < 1.5
        assert slow.recv(100) == b"" and time.monotonic() - t0 < 1.5


@pytest.mark.parametrize("kind", KINDS)
def test_the_doors_connections_count_against_the_bound(kind: str) -> None:
    limits = ConnectionLimits(max_connections=1)
    with door_server(ready_state(), "uvloop", limits, kind=kind) as port:
        held = [connect(port) for _ in range(1 + PING_RESERVE)]  # idle: all with the door
        try:
            time.sleep(0.3)
            with connect(port) as over:
                over.settimeout(5)
                assert over.recv(100) == b""  # closed at accept: not even /ping
            held[-1].sendall(b"POST /invocations HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}")
            busy = read_response(held[-1])
            assert status(busy) == 503 and b"NEURONSERVE_MAX_CONNECTIONS" in busy
            held[0].sendall(PING.replace(b"close", b"keep-alive"))
            assert status(read_response(held[0])) == 200  # the reserve answers /ping
        finally:
            for conn in held:
                conn.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_long_unfinished_probe_head_is_handed_over_whole(kind: str) -> None:
    """A probe's request line with headers that never end within the door's reads: the bytes it read
    (up to two reads' worth) reach the loop's parser, all of them, and the request is answered."""
    with door_server(ready_state(), "uvloop", kind=kind) as port, connect(port) as conn:
        head = b"GET /ping HTTP/1.1\r\nHost: t\r\n" + b"".join(
            b"X-Pad-%05d: %s\r\n" % (i, b"p" * 90) for i in range(160)
        )
        conn.sendall(head[:8191])  # one byte under a read: the next read fills it up
        time.sleep(0.2)
        conn.sendall(head[8191:] + b"Connection: close\r\n\r\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        assert status(data) == 200  # answered by the loop: every header arrived intact


def test_a_failed_accept_pauses_accepting_for_a_second_then_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """EMFILE in accept (the open-file limit reached): the door neither spins nor stops; it accepts again
    a second later, as asyncio's own server does. The failure is injected into the one accept call."""
    from neuronserve.serve import gilheld

    real, failed = gilheld.accept, []

    def accept(fd: int) -> int | None:
        if not failed:
            failed.append(time.monotonic())
            raise OSError(24, "Too many open files")
        return real(fd)

    monkeypatch.setattr(gilheld, "accept", accept)
    with door_server(ready_state(), "uvloop") as port:
        ping, took = exchange(port, PING)
        assert status(ping) == 200 and 0.8 < took < 3.0, took
        assert len(failed) == 1
        again, took = exchange(port, PING)
        assert status(again) == 200 and took < 0.5


def test_a_probe_the_door_cannot_answer_is_answered_by_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The door's answer failing (the state mid-change, say: injected here) hands the probe to the loop,
    which answers it; the door keeps serving."""
    from neuronserve.front import probes

    calls: list[str] = []

    def broken(state: ServerState, path: str) -> object:
        calls.append(path)
        raise RuntimeError("mid-change")

    monkeypatch.setattr(probes, "answer", broken)
    with door_server(ready_state(), "uvloop") as port:
        for _ in range(2):
            ping, _ = exchange(port, PING)
            assert status(ping) == 200
    assert calls == ["/ping", "/ping"]
