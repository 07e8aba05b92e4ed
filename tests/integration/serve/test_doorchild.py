"""The door's process on its own (`python -m neuronserve.serve.doorchild`, serve/doorchild.py), driven
as the front drives it: a listening socket, the answers in shared memory, a Unix socket. A probe gets
the published bytes; any other connection arrives on the Unix socket as the connection itself, with
the bytes read so far; with no fresh answers a probe is handed on too; a SIGTERM is ignored; the
end of the Unix socket ends the process and the connections it held."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.support.workers import wait_for

from neuronserve.front.board import Board
from neuronserve.serve import shortslice
from neuronserve.serve.doorchild import HEAD_S
from neuronserve.serve.probeboard import ProbeBoard

pytestmark = pytest.mark.integration  # a process of its own on a real port

PING = b"GET /ping HTTP/1.1\r\nHost: t\r\n\r\n"
ANSWERS = [
    b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nkept",
    b"HTTP/1.1 200 OK\r\n\r\nclosed",
    b"live",
    b"live!",
]


@dataclass
class Child:
    proc: subprocess.Popen[bytes]
    port: int
    channel: socket.socket
    board: ProbeBoard


@contextlib.contextmanager
def child(
    header_timeout_s: float = 5.0, most_connections: int = 100, basis: tuple[int, int, int] | None = None
) -> Iterator[Child]:
    board = ProbeBoard.create()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    cfg = {
        "listen_fd": listener.fileno(),
        "channel_fd": theirs.fileno(),
        "board_fd": board.fd,
        "header_timeout_s": header_timeout_s,
        "most_connections": most_connections,
        "keep_alive_s": 5.0,
        "log_format": "text",
        "basis": basis,
    }
    fds = (listener.fileno(), theirs.fileno(), board.fd) + (() if basis is None else (basis[0],))
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuronserve.serve.doorchild", json.dumps(cfg)],
        pass_fds=fds,
    )
    theirs.close()
    port = listener.getsockname()[1]
    listener.close()  # the door's process holds it now
    ours.settimeout(10)
    try:
        yield Child(proc, port, ours, board)
    finally:
        ours.close()
        proc.wait(10)
        board.close()


def _handed(c: Child) -> tuple[socket.socket, float, bytes]:
    message, fds, _, _ = socket.recv_fds(c.channel, 65536, 4)
    assert len(fds) == 1
    (head_s,) = HEAD_S.unpack_from(message)
    return socket.socket(fileno=fds[0]), head_s, message[HEAD_S.size :]


def test_a_probe_gets_the_published_bytes_and_keeps_its_connection() -> None:
    with child() as c:
        c.board.publish(ANSWERS, 0)
        with socket.create_connection(("127.0.0.1", c.port), timeout=10) as conn:
            for _ in range(2):
                conn.sendall(PING)
                assert conn.recv(100) == ANSWERS[0]
            conn.sendall(PING.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
            assert conn.recv(100) == ANSWERS[1]
            assert conn.recv(100) == b""


def test_the_process_runs_with_the_short_slice() -> None:
    with child() as c:
        c.board.publish(ANSWERS, 0)
        with socket.create_connection(("127.0.0.1", c.port), timeout=10) as conn:
            conn.sendall(PING)
            assert conn.recv(100) == ANSWERS[0]  # running, past its start-up
        sched = Path(f"/proc/{c.proc.pid}/sched").read_text()
        if "se.slice" not in sched or os.uname().machine not in shortslice.SYSCALL:
            pytest.skip("this kernel does not show a task's slice, or the architecture is not known")
        line = next(ln for ln in sched.splitlines() if ln.startswith("se.slice"))
        assert int(line.split(":")[1]) == shortslice.SLICE_NS


def test_another_request_arrives_as_the_connection_itself_with_its_bytes() -> None:
    with child() as c:
        c.board.publish(ANSWERS, 0)
        with socket.create_connection(("127.0.0.1", c.port), timeout=10) as conn:
            conn.sendall(b"POST /invocations HTTP/1.1\r\n")
            handed, head_s, preread = _handed(c)
            with handed:
                assert preread == b"POST /invocations HTTP/1.1\r\n" and 0 < head_s <= 5.0
                handed.sendall(b"answered by the front")
                assert conn.recv(100) == b"answered by the front"
                conn.sendall(b"rest")
                assert handed.recv(100) == b"rest"


def test_hand_offs_the_front_cannot_take_yet_wait_and_probes_are_still_answered() -> None:
    """The front's loop blocked: the Unix socket's buffer fills (a socket pair's sends are bounded by
    the sender's buffer, some hundred hand-offs), the door keeps the rest and goes on answering probes;
    once the front reads, every connection arrives, each still the client's."""
    count = 600
    with child(most_connections=2 * count) as c:
        c.board.publish(ANSWERS, 0)
        clients = [socket.create_connection(("127.0.0.1", c.port), timeout=10) for _ in range(count)]
        try:
            for i, conn in enumerate(clients):
                conn.sendall(b"POST /n%d HTTP/1.1\r\n" % i)
            time.sleep(0.5)
            assert 0 < c.board.door_held() < count  # some in the socket's queue, the rest kept by the door
            c.board.publish(ANSWERS, 0)  # fresh, as the front's publisher keeps them
            with socket.create_connection(("127.0.0.1", c.port), timeout=10) as prober:
                prober.sendall(PING)
                assert prober.recv(100) == ANSWERS[0]  # the door is not stuck behind them
            taken = [_handed(c) for _ in range(count)]
            for handed, _, preread in taken:
                with handed:
                    handed.sendall(preread)  # echo: the bytes go back to the client who sent them
            for i, conn in enumerate(clients):
                assert conn.recv(100) == b"POST /n%d HTTP/1.1\r\n" % i
            wait_for(lambda: c.board.door_held() == 0, 5.0, "every hand-off taken")
        finally:
            for conn in clients:
                conn.close()


def test_with_no_fresh_answers_a_probe_is_handed_to_the_front() -> None:
    with child() as c, socket.create_connection(("127.0.0.1", c.port), timeout=10) as conn:
        conn.sendall(PING)  # nothing published: the front's loop answers
        handed, _, preread = _handed(c)
        handed.close()
        assert preread == PING


def test_a_probe_is_answered_only_while_the_watched_bytes_are_the_published_basis() -> None:
    """A front worker's answers follow the supervisor's bytes on its board: changed after the worker
    published, the probe goes to the worker's loop; the same again, the door answers."""
    board = Board.create(1, 1, 0)
    try:
        board.set_flags(4, True, True)
        with child(basis=board.basis_span()) as c:
            c.board.publish(ANSWERS, 0, board.basis())
            with socket.create_connection(("127.0.0.1", c.port), timeout=10) as conn:
                conn.sendall(PING)
                assert conn.recv(100) == ANSWERS[0]
                board.set_flags(4, True, False)  # the engine died: the supervisor wrote it
                conn.sendall(PING)
                handed, _, preread = _handed(c)
                handed.close()
                assert preread == PING
            board.set_flags(4, True, True)
            with socket.create_connection(("127.0.0.1", c.port), timeout=10) as conn:
                conn.sendall(PING)
                assert conn.recv(100) == ANSWERS[0]
            board.publish({"detail": "a new snapshot"})  # its sequence number is in the basis too
            with socket.create_connection(("127.0.0.1", c.port), timeout=10) as conn:
                conn.sendall(PING)
                handed, _, _ = _handed(c)
                handed.close()
    finally:
        board.close()
        os.close(board.fd)


def test_a_probe_built_while_an_engine_now_gone_was_alive_goes_to_the_front() -> None:
    """The answers name the engine processes they were built with alive: once one has exited, the
    door hands the probe to the front (whose waitpid sees the death), before any new publication."""
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with child() as c:
            c.board.publish(ANSWERS, 0, engines=[engine.pid])
            with socket.create_connection(("127.0.0.1", c.port), timeout=10) as conn:
                conn.sendall(PING)
                assert conn.recv(100) == ANSWERS[0]
                engine.kill()
                engine.wait()
                conn.sendall(PING)
                handed, _, preread = _handed(c)
                handed.close()
                assert preread == PING
            c.board.publish(ANSWERS, 0)  # published again without it: answered
            with socket.create_connection(("127.0.0.1", c.port), timeout=10) as conn:
                conn.sendall(PING)
                assert conn.recv(100) == ANSWERS[0]
    finally:
        engine.kill()
        engine.wait()


def test_sigterm_is_the_fronts_and_the_channels_end_ends_the_process() -> None:
    with child() as c:
        c.board.publish(ANSWERS, 0)
        with socket.create_connection(("127.0.0.1", c.port), timeout=10) as idle:
            time.sleep(0.2)
            os.kill(c.proc.pid, signal.SIGTERM)
            time.sleep(0.2)
            assert c.proc.poll() is None and c.board.door_held() == 1
            c.channel.shutdown(socket.SHUT_RDWR)
            assert c.proc.wait(5) == 0
            assert idle.recv(100) == b""  # the held connection closed as the process ended
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", c.port), timeout=2)  # nothing accepts any more
