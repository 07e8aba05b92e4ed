"""serve/chunkpipe.py on a real uvicorn over a real 127.0.0.1 socket: a Stream's middle chunks go
through the connection's pipe (the app's `send` sees only the start, the first chunk and the end),
the client gets exactly the bytes uvicorn's own `send` would have framed, a HEAD answer and a
Content-Length answer never use it, and a client that stops reading still stops the stream (the
chunk goes through `send`, whose flow control waits): the slow-reader bound holds."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest
import uvicorn

from neuronserve.front import proxy
from neuronserve.front.enginepool import EnginePool
from neuronserve.front.streaming import Stream
from neuronserve.serve.connections import ConnectionLimits, protocol_class

pytestmark = pytest.mark.integration  # uvicorn on a real port

CHUNKS = [b"data: %d %s\n\n" % (i, b"x" * i) for i in range(40)]


class Recorder:
    """The app: a Stream of `chunks` with `headers`, recording each message its `send` was given."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.produced = 0
        self.chunks: list[bytes] = CHUNKS
        self.headers: dict[str, str] | None = None
        self.forever = False

    async def _gen(self) -> AsyncGenerator[bytes, None]:
        i = 0
        while self.forever or i < len(self.chunks):
            self.produced += 1
            yield self.chunks[i % len(self.chunks)]
            i += 1
            await asyncio.sleep(0)  # as an engine read does: the loop turns between chunks

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def recording(message: dict[str, Any]) -> None:
            self.messages.append(message)
            await send(message)

        await Stream(self._gen(), headers=self.headers, media_type="text/event-stream")(
            scope, receive, recording
        )


@contextlib.asynccontextmanager
async def serving(app: Recorder, *, guarded: bool = True, sndbuf: int = 0) -> AsyncIterator[int]:
    """uvicorn with the front's protocol (`guarded`: it has the pipe) or uvicorn's own httptools one;
    `sndbuf`: the accepted sockets' send buffer (inherited from the listening one), so that a client
    that reads slowly fills it soon."""
    sock = socket.socket()
    if sndbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    sock.bind(("127.0.0.1", 0))
    http: Any = protocol_class(ConnectionLimits()) if guarded else "httptools"
    config = uvicorn.Config(app, http=http, lifespan="off", log_config=None, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        server.force_exit = True
        await asyncio.wait_for(task, 10)


async def _fetch(port: int, method: str = "GET") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} /s HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n".encode())
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


def _without_date(answer: bytes) -> bytes:
    return b"\r\n".join(line for line in answer.split(b"\r\n") if not line.startswith(b"date:"))


def test_middle_chunks_skip_send_and_the_client_gets_uvicorns_own_bytes() -> None:
    async def run() -> tuple[bytes, bytes, Recorder]:
        piped, plain = Recorder(), Recorder()
        async with serving(piped) as port:
            through_pipe = await _fetch(port)
        async with serving(plain, guarded=False) as port:
            through_send = await _fetch(port)
        assert len(plain.messages) == len(CHUNKS) + 2  # no pipe: every chunk through send
        return through_pipe, through_send, piped

    through_pipe, through_send, piped = asyncio.run(run())
    assert _without_date(through_pipe) == _without_date(through_send)
    assert b"transfer-encoding: chunked" in through_pipe
    assert through_pipe.endswith(b"0\r\n\r\n")
    kinds = [(m["type"], m.get("body"), m.get("more_body")) for m in piped.messages]
    assert kinds == [
        ("http.response.start", None, None),
        ("http.response.body", CHUNKS[0], True),
        ("http.response.body", b"", False),
    ]


@pytest.mark.parametrize("case", ["head", "content-length"])
def test_an_answer_that_is_not_chunked_never_uses_the_pipe(case: str) -> None:
    async def run() -> tuple[bytes, Recorder]:
        app = Recorder()
        if case == "content-length":
            app.headers = {"content-length": str(sum(map(len, CHUNKS)))}
        async with serving(app) as port:
            return await _fetch(port, "HEAD" if case == "head" else "GET"), app

    answer, app = asyncio.run(run())
    assert len(app.messages) == len(CHUNKS) + 2
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head
    assert body == (b"" if case == "head" else b"".join(CHUNKS))


def test_a_client_that_stops_reading_stops_the_stream() -> None:
    """64 KiB chunks forever to a client that reads nothing: the stream must stop being pulled once the
    socket buffers and the transport's high-water mark are full (a few MiB), not grow in memory."""

    async def run() -> tuple[int, int]:
        app = Recorder()
        app.chunks = [b"y" * 65536]
        app.forever = True
        async with serving(app) as port:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /s HTTP/1.1\r\nhost: x\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(1.0)
            stalled_at = app.produced
            await asyncio.sleep(1.0)
            later = app.produced
            writer.transport.abort()
        return stalled_at, later

    start = time.monotonic()
    stalled_at, later = asyncio.run(run())
    assert later == stalled_at, f"the stream went on while nobody read: {stalled_at} -> {later} chunks"
    assert stalled_at < 2000, f"{stalled_at} chunks of 64 KiB produced for a client that read nothing"
    assert time.monotonic() - start < 20


EVENTS = [b'data: {"n": %d, "pad": "%s"}\n\n' % (i, b"p" * 900) for i in range(3000)]


async def _engine(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An engine that streams EVENTS as fast as the front reads them, several per write."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    for i in range(0, len(EVENTS), 3):
        writer.write(b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in EVENTS[i : i + 3]))
        await writer.drain()
        await asyncio.sleep(0)
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    writer.close()


def _dechunk(raw: bytes) -> bytes:
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    out = []
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return b"".join(out)
        out.append(rest[:size])
        assert rest[size : size + 2] == b"\r\n"
        rest = rest[size + 2 :]


def test_an_engine_stream_reaches_a_slow_then_fast_client_whole_and_in_order() -> None:
    """front/proxy.py's relay over the real engine client: while the client reads slowly its writes
    pause and the chunks go through `send` (flow control); once it reads fast, through the pipe. Both
    happen, and the client gets every event once, in order."""
    through_send = 0

    async def run() -> bytes:
        engine = await asyncio.start_server(_engine, "127.0.0.1", 0)
        engine_url = f"http://127.0.0.1:{engine.sockets[0].getsockname()[1]}"
        pool = EnginePool(4, wait_s=5.0, connect_s=5.0, read_s=10.0)

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            async def counting(message: dict[str, Any]) -> None:
                nonlocal through_send
                through_send += message["type"] == "http.response.body"
                await send(message)

            resp = await pool.request(engine_url, "POST", "/v1/completions", {}, b"{}")
            await (await proxy.relay(resp))(scope, receive, counting)

        served: Any = app
        try:
            async with serving(served, sndbuf=16384) as port:
                return await asyncio.to_thread(_slow_then_fast_client, port)
        finally:
            pool.close()
            engine.close()

    raw = asyncio.run(run())
    assert _dechunk(raw) == b"".join(EVENTS)
    assert through_send > 2, "the slow client never sent a chunk back through send's flow control"
    assert through_send < len(EVENTS) // 3, "no chunk went through the pipe"


def _slow_then_fast_client(port: int) -> bytes:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.settimeout(20)
    sock.sendall(b"POST /s HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
    parts = []
    for _ in range(40):  # about half a second of a slow reader
        parts.append(sock.recv(2048))
        time.sleep(0.01)
    while data := sock.recv(1 << 16):
        parts.append(data)
    sock.close()
    return b"".join(parts)
