"""front/streaming.py's Stream on a real uvicorn with the front's connection protocol, over a real
127.0.0.1 socket, against clients that read slowly: a client that stops reading stops the stream (the
chunks wait in `send`'s flow control, never pile up in memory), and an engine stream relayed through
front/proxy.py reaches a client that reads slowly, then fast, whole and in order."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from tests.support.uvicornrun import serving

from neuronserve.front import proxy
from neuronserve.front.enginepool import EnginePool
from neuronserve.front.streaming import Stream

pytestmark = pytest.mark.integration  # uvicorn on a real port


class Endless:
    """The app: a Stream of 64 KiB chunks that never ends, counting the chunks it made."""

    def __init__(self) -> None:
        self.produced = 0

    async def _gen(self) -> AsyncGenerator[bytes, None]:
        chunk = b"y" * 65536
        while True:
            self.produced += 1
            yield chunk
            await asyncio.sleep(0)  # as between engine reads: the loop turns

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await Stream(self._gen(), media_type="text/event-stream")(scope, receive, send)


def test_a_client_that_stops_reading_stops_the_stream() -> None:
    """64 KiB chunks forever to a client that reads nothing: the stream must stop being pulled once the
    socket buffers and the transport's high-water mark are full (a few MiB), not grow in memory."""

    async def run() -> tuple[int, int]:
        app = Endless()
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
    """front/proxy.py's relay over the real engine client: while the client reads slowly the front's
    writes pause (send waits in its flow control, and the engine's reads wait behind it); then it reads
    fast. The client gets every event once, in order."""
    through_send = 0
    paused = False

    async def run() -> bytes:
        engine = await asyncio.start_server(_engine, "127.0.0.1", 0)
        engine_url = f"http://127.0.0.1:{engine.sockets[0].getsockname()[1]}"
        pool = EnginePool(4, wait_s=5.0, connect_s=5.0, read_s=10.0)

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            async def counting(message: dict[str, Any]) -> None:
                nonlocal through_send, paused
                through_send += message["type"] == "http.response.body"
                began = time.monotonic()
                await send(message)
                paused = paused or time.monotonic() - began > 0.05  # waited for the client to read

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
    assert through_send > 2, "the stream ended before a chunk was sent"
    assert paused, "the slow client never paused the front's writes: the test did not test flow control"


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
