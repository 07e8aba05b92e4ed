"""What the probe door as a process of its own (serve/doorprocess.py, serve/doorchild.py) adds to the
guarantees both door kinds keep (test_probedoor.py runs those for both): it is a process of its own
that ends with the server, its answers follow a change of the state at once (and what changes
without telling within the publishing period), a door process
that dies (or cannot be started) leaves a thread door in its place with no connection refused, it
ends when its front is gone, and it holds none of the front's secrets."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.support.doorserver import (
    PING,
    connect,
    door_server,
    exchange,
    read_response,
    ready_state,
    status,
)
from tests.support.workers import wait_for

from neuronserve.front.board import Board
from neuronserve.front.state import Phase
from neuronserve.front.statemirror import MirroredState, publish
from neuronserve.serve import doorprocess
from neuronserve.serve.doorprocess import PUBLISH_S, ProcessDoor

pytestmark = pytest.mark.integration  # uvicorn and the door's process on a real port

KEEP = PING.replace(b"close", b"keep-alive")


def _door(doors: list[Any]) -> ProcessDoor:
    """The server's door, once started (uvicorn says "started" before QuietServer starts the door)."""
    (door,) = doors
    assert isinstance(door, ProcessDoor)
    wait_for(lambda: door.proc is not None, 5.0, "the door process to start")
    return door


def test_the_door_is_a_process_of_its_own_that_ends_with_the_server() -> None:
    doors: list[Any] = []
    with door_server(ready_state(), "uvloop", kind="process", doors=doors) as port:
        proc = _door(doors).proc
        assert proc is not None and proc.pid != os.getpid() and proc.poll() is None
        assert status(exchange(port, PING)[0]) == 200
    assert proc.poll() is not None
    # a connection the loop adopts during its shutdown still counts the door's: none, not an error
    assert doors[0].held() == 0


def test_a_phase_change_and_the_engines_health_reach_the_process_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Published by the change itself, not the next round: with the publishing thread all but off
    (a round a minute), /ping follows the health and the phase the moment they change."""
    monkeypatch.setattr(doorprocess, "PUBLISH_S", 60.0)
    state = ready_state()
    with door_server(state, "uvloop", kind="process") as port:
        assert status(exchange(port, PING)[0]) == 200
        state.set_engine_health(False)
        unhealthy, _ = exchange(port, PING)
        assert status(unhealthy) == 503 and b"health check failing" in unhealthy
        state.set_engine_health(True)
        assert status(exchange(port, PING)[0]) == 200
        state.move(Phase.DRAINING)
        drained, _ = exchange(port, PING)
        assert status(drained) == 503 and b"DRAINING" in drained


def test_an_engine_exit_reaches_the_process_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's main process exits: the routes see it at once (a waitpid), and so does the door's
    process, whose publisher waits on the engine's pidfd, not for its next round (a minute here)."""
    monkeypatch.setattr(doorprocess, "PUBLISH_S", 60.0)
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    state = ready_state()
    state.engine_alive = lambda: engine.poll() is None
    state.engine_pids = lambda: [engine.pid]
    try:
        with door_server(state, "uvloop", kind="process") as port:
            assert status(exchange(port, PING)[0]) == 200
            engine.kill()
            started = time.monotonic()
            wait_for(lambda: status(exchange(port, PING)[0]) == 503, 1.0, "/ping 503 from the door")
            dead, _ = exchange(port, PING)
            assert b"the engine process exited" in dead and time.monotonic() - started < 1.0  # STALE_S: 2
    finally:
        engine.kill()
        engine.wait()


def test_what_changes_without_telling_reaches_the_process_within_the_publishing_period() -> None:
    """An engine death seen only by a waitpid (the state's `engine_alive`) is published by the next
    round of the publishing thread."""
    state = ready_state()
    alive = [True]
    state.engine_alive = lambda: alive[0]
    with door_server(state, "uvloop", kind="process") as port:
        assert status(exchange(port, PING)[0]) == 200
        alive[0] = False
        time.sleep(3 * PUBLISH_S)
        dead, _ = exchange(port, PING)
        assert status(dead) == 503 and b"the engine process exited" in dead


def test_a_front_workers_door_answers_from_the_supervisors_bytes_as_they_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A front worker's state is the supervisor's board (front/statemirror.py): once the supervisor
    wrote that the engine is unhealthy, the door's published 200 is not used (the worker's loop answers
    503), and the door's process wakes the publisher, whose 503 it then answers itself, long before
    the next round (a round a minute here)."""
    monkeypatch.setattr(doorprocess, "PUBLISH_S", 60.0)
    board = Board.create(1, 1, 0)
    supervisor = ready_state()
    publish(board, supervisor, None)
    doors: list[Any] = []
    try:
        with door_server(MirroredState(board), "uvloop", kind="process", doors=doors) as port:
            door = _door(doors)
            assert status(exchange(port, PING)[0]) == 200
            supervisor.set_engine_health(False)
            publish(board, supervisor, None)
            unhealthy, _ = exchange(port, PING)
            assert status(unhealthy) == 503 and b"health check failing" in unhealthy

            def republished() -> bool:
                assert door.board is not None
                answer = door.board.read("/ping", True, board.basis())[0]
                return answer is not None and answer.startswith(b"HTTP/1.1 503")

            wait_for(republished, 2.0, "the door's process to wake the publisher")
            assert status(exchange(port, PING)[0]) == 503
    finally:
        board.close()
        os.close(board.fd)


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
        wait_for(lambda: door.fallback is not None, 5.0, "the thread door")
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
            wait_for(lambda: door.held() == 1, 5.0, "the door to hold the connection")
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
        wait_for(lambda: door.fallback is not None, 5.0, "the thread door")
        blocker.sendall(b"GET /test-only/block HTTP/1.1\r\nHost: t\r\n\r\n")
        time.sleep(0.3)
        ping, took = exchange(port, PING)
        assert status(ping) == 200 and took < 0.5
    assert "no process of its own" in caplog.text
