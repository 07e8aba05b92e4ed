"""A real front (app, gate) on the server's own uvicorn (serve/frontstack.py QuietServer, serve/listener.py
config) behind a probe door of either kind, on a real socket, with a test-only route that blocks the
loop (tests/support/blocking.py): tests/integration/serve/test_probedoor.py (the thread) and
test_doorprocess.py (the door's process)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from tests.support.blocking import blocking

from neuronserve.front.app import create_app
from neuronserve.front.gate import Gate
from neuronserve.front.proxy import make_client
from neuronserve.front.state import Phase, ServerState
from neuronserve.serve import eventloop, listener
from neuronserve.serve.connections import ConnectionLimits
from neuronserve.serve.doorprocess import ProcessDoor
from neuronserve.serve.frontstack import QuietServer
from neuronserve.serve.probedoor import ProbeDoor
from neuronserve.types import ServeOptions

BLOCK_S = 2.0
PING = b"GET /ping HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
LOOPS = {"uvloop": eventloop.loop_factory(), "asyncio": None}


def ready_state(clock: Any = time.monotonic) -> ServerState:
    state = ServerState(clock)
    state.move(Phase.LOADING)
    state.set_engine_health(True)
    state.move(Phase.READY)
    return state


@contextlib.contextmanager
def door_server(
    state: ServerState,
    loop: str,
    limits: ConnectionLimits | None = None,
    door_on: bool = True,
    kind: str = "thread",
    doors: list[Any] | None = None,
) -> Iterator[int]:
    """The server's port; `kind`: "thread" (ProbeDoor) or "process" (ProcessDoor); the door is appended
    to `doors` when given."""
    limits = limits or ConnectionLimits()
    opts = ServeOptions(host="127.0.0.1", port=0)
    engine = make_client("http://127.0.0.1:9", 5.0, 8)
    door: Any = None
    if door_on:
        door = (ProcessDoor if kind == "process" else ProbeDoor)(state, limits, listener.KEEP_ALIVE_S)
    if doors is not None:
        doors.append(door)
    server = QuietServer(
        listener.uvicorn_config(
            blocking(Gate(create_app(state, opts, engine), state, 4), BLOCK_S),
            opts,
            limits,
            door.held if door else None,
        ),
        door,
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)

    def run() -> None:
        with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
            runner.run(server.serve(sockets=[sock]))
            runner.run(engine.aclose())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
    assert not thread.is_alive()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def exchange(port: int, request: bytes) -> tuple[bytes, float]:
    """The whole answer to `request` on a new connection the server closes, and how long it took."""
    t0 = time.monotonic()
    with connect(port) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data, time.monotonic() - t0


_pending: dict[int, bytes] = {}  # bytes read past a response, by connection (pipelined answers)


def read_response(conn: socket.socket) -> bytes:
    """One response with a content-length, on a kept connection."""
    data = _pending.pop(conn.fileno(), b"")
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += conn.recv(65536)
    if body[length:]:
        _pending[conn.fileno()] = body[length:]
    return head + b"\r\n\r\n" + body[:length]


def status(data: bytes) -> int:
    return int(data.split(b" ", 2)[1])


def read_response_or_empty(conn: socket.socket) -> bytes:
    conn.settimeout(10)
    return conn.recv(65536)


def without_date(data: bytes) -> bytes:
    return re.sub(rb"date: [^\r]*\r\n", b"", data)
