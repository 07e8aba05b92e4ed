"""The probe door as a process of its own (serve/doorprocess.py, serve/doorchild.py) in front of the real
front on the server's own uvicorn, on a real socket: the same guarantees as the thread door
(test_probedoor.py), plus what a second process adds: its answers follow the state within the
publishing period, a door process that dies leaves a thread door in its place with no connection
refused, and the door's process ends with the front."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

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
from neuronserve.serve.doorprocess import PUBLISH_S, ProcessDoor

pytestmark = pytest.mark.integration  # uvicorn and the door's process on a real port

KEEP = PING.replace(b"close", b"keep-alive")


def _wait_until(check: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _door(doors: list[Any]) -> ProcessDoor:
    """The server's door, once started (uvicorn says "started" before QuietServer starts the door)."""
    (door,) = doors
    assert isinstance(door, ProcessDoor)
    _wait_until(lambda: door.proc is not None)
    return door


@pytest.mark.parametrize("loop", LOOPS)
def test_probes_answer_from_the_process_while_the_loop_is_blocked(loop: str) -> None:
    doors: list[Any] = []
    with door_server(ready_state(), loop, kind="process", doors=doors) as port, connect(port) as blocker:
        proc = _door(doors).proc
        assert proc is not None and proc.pid != os.getpid()
        blocker.sendall(b"GET /test-only/block HTTP/1.1\r\nHost: t\r\n\r\n")
        time.sleep(0.3)  # the loop sleeps now
        ping, took = exchange(port, PING)
        assert status(ping) == 200 and took < 0.5, (ping, took)
        with connect(port) as kept:
            for _ in range(2):  # a kept connection stays with the door
                t0 = time.monotonic()
                kept.sendall(b"GET /live HTTP/1.1\r\nHost: t\r\n\r\n")
                live = read_response(kept)
                assert status(live) == 200 and b'"live":true' in live and time.monotonic() - t0 < 0.5
        handed, waited = exchange(
            port, b"GET /ping?from=loop HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        )
        assert status(handed) == 200 and waited > 0.5  # sent to the front, served once its loop ran again
        assert status(read_response_or_empty(blocker)) == 204
    assert proc.poll() is not None  # the door's process ended with the server


@pytest.mark.parametrize("phase", ["READY", "LOADING"])
@pytest.mark.parametrize("path", [b"/ping", b"/live"])
def test_the_process_answers_the_bytes_the_loop_answers(phase: str, path: bytes) -> None:
    state = ready_state(lambda: 100.0) if phase == "READY" else ServerState(lambda: 100.0)
    if phase == "LOADING":
        state.move(Phase.LOADING)
    with door_server(state, "uvloop", kind="process") as port:
        head = b"GET " + path + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
        by_door, _ = exchange(port, head + b"\r\n")
        by_loop, _ = exchange(port, head + b"Content-Length: 0\r\n\r\n")  # a body header: handed over
    assert status(by_door) == (503 if (phase, path) == ("LOADING", b"/ping") else 200)
    assert without_date(by_door) == without_date(by_loop)
    assert b"\r\ndate: " in by_door and b"\r\nserver: uvicorn\r\n" in by_door


def test_a_phase_change_reaches_the_process_within_the_publishing_period() -> None:
    state = ready_state()
    with door_server(state, "uvloop", kind="process") as port:
        assert status(exchange(port, PING)[0]) == 200
        state.move(Phase.DRAINING)
        time.sleep(3 * PUBLISH_S)
        drained, _ = exchange(port, PING)
        assert status(drained) == 503 and b"DRAINING" in drained


def test_a_handed_over_connection_keeps_its_bytes_and_pipelined_requests() -> None:
    with door_server(ready_state(), "uvloop", kind="process") as port, connect(port) as conn:
        conn.sendall(b"GE")  # undecided: the door reads on
        time.sleep(0.2)
        conn.sendall(b"T /ping?x=1 HTTP/1.1\r\nHost: t\r\n\r\n")
        assert status(read_response(conn)) == 200  # "GE" reached the loop's parser first
        conn.sendall(b"GET /live HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n")
        assert status(read_response(conn)) == 200
        nope = read_response(conn)
        assert status(nope) == 404 and b"no route" in nope
        with connect(port) as piped:  # a probe, then a request for the loop, in one write
            piped.sendall(KEEP + b"GET /info HTTP/1.1\r\nHost: t\r\n\r\n")
            assert status(read_response(piped)) == 200
            assert status(read_response(piped)) == 200


def test_a_long_unfinished_probe_head_is_handed_over_whole() -> None:
    """A probe's request line with headers that never end within the door's reads: the bytes it read
    (up to two reads' worth) reach the loop's parser, all of them, and the request is answered."""
    with door_server(ready_state(), "uvloop", kind="process") as port, connect(port) as conn:
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


def test_the_header_deadline_counts_from_the_processs_accept() -> None:
    limits = ConnectionLimits(header_timeout_s=1.0)
    with (
        door_server(ready_state(), "uvloop", limits, kind="process") as port,
        connect(port) as slow,
        connect(port) as late,
    ):
        t0 = time.monotonic()
        slow.sendall(b"GET /pi")  # a probe's beginning, never finished: the door closes it
        time.sleep(0.6)
        late.sendall(b"P")  # not a probe: handed over with 0.4 s of its deadline left
        assert late.recv(100) == b"" and time.monotonic() - t0 < 1.5
        assert slow.recv(100) == b"" and time.monotonic() - t0 < 1.5


def test_the_processs_connections_count_against_the_bound() -> None:
    limits = ConnectionLimits(max_connections=1)
    doors: list[Any] = []
    with door_server(ready_state(), "uvloop", limits, kind="process", doors=doors) as port:
        held = [connect(port) for _ in range(1 + PING_RESERVE)]  # idle: all with the door
        try:
            _wait_until(lambda: _door(doors).held() == 1 + PING_RESERVE)  # the loop's protocol sees them
            with connect(port) as over:
                over.settimeout(5)
                assert over.recv(100) == b""  # closed at accept: not even /ping
            held[-1].sendall(b"POST /invocations HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}")
            busy = read_response(held[-1])
            assert status(busy) == 503 and b"NEURONSERVE_MAX_CONNECTIONS" in busy
            held[0].sendall(KEEP)
            assert status(read_response(held[0])) == 200  # the reserve answers /ping
        finally:
            for conn in held:
                conn.close()


def test_a_killed_door_process_leaves_a_thread_door_and_refuses_no_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    doors: list[Any] = []
    with door_server(ready_state(), "uvloop", kind="process", doors=doors) as port:
        door = _door(doors)
        assert door.proc is not None
        os.kill(door.proc.pid, signal.SIGKILL)
        door.proc.wait(5)
        # at once, before the front has noticed: connections wait in the backlog, then are answered
        for _ in range(5):
            ping, _ = exchange(port, PING)
            assert status(ping) == 200
        _wait_until(lambda: door.fallback is not None)
        with connect(port) as conn:
            conn.sendall(b"GET /info HTTP/1.1\r\nHost: t\r\n\r\n")
            assert status(read_response(conn)) == 200
    assert "its process ended" in caplog.text


def test_the_door_process_ends_when_its_front_is_gone() -> None:
    """The front's side of the channel closed without a word (the front killed): the door's process
    closes what it holds and exits, and no longer accepts."""
    doors: list[Any] = []
    with door_server(ready_state(), "uvloop", kind="process", doors=doors) as port:
        door = _door(doors)
        proc = door.proc
        assert proc is not None
        with connect(port) as idle:
            _wait_until(lambda: door.held() == 1)
            channel = door._channel  # as if the front died: only the kernel closes its end
            assert channel is not None
            channel.shutdown(socket.SHUT_RDWR)
            proc.wait(5)
            idle.settimeout(5)
            assert idle.recv(100) == b""  # closed by the exiting door


def test_the_door_process_gets_no_secret_from_the_fronts_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_not_for_the_door")
    doors: list[Any] = []
    with door_server(ready_state(), "uvloop", kind="process", doors=doors):
        proc = _door(doors).proc
        assert proc is not None
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
    assert b"hf_not_for_the_door" not in environ and b"PATH=" in environ


def test_no_process_to_be_had_leaves_the_thread_door(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Starting the door's process fails (EAGAIN: a pids limit reached, say): the front serves, and a
    thread door answers the probes while the loop is blocked."""
    from neuronserve.serve import doorprocess

    def no_process(*_args: object, **_kwargs: object) -> object:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(doorprocess.subprocess, "Popen", no_process)
    doors: list[Any] = []
    with door_server(ready_state(), "uvloop", kind="process", doors=doors) as port, connect(port) as blocker:
        (door,) = doors
        _wait_until(lambda: door.fallback is not None)
        blocker.sendall(b"GET /test-only/block HTTP/1.1\r\nHost: t\r\n\r\n")
        time.sleep(0.3)
        ping, took = exchange(port, PING)
        assert status(ping) == 200 and took < 0.5
    assert "no process of its own" in caplog.text
