"""front/enginehttp.py against raw HTTP/1.1 servers on 127.0.0.1 (asyncio streams, bytes written by hand,
so every framing the engine might use is exercised): an answer by length, by chunks, until the
connection closes, a HEAD answer, an interim 100, a broken or malformed answer, the silence timer, and
reading paused past PAUSE_BYTES without counting as the engine's silence."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from neuronserve.front import enginehttp
from neuronserve.front.enginehttp import EngineGone, EngineResponse
from neuronserve.front.enginepool import EnginePool

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def server(script: Script) -> AsyncIterator[str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await script(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.close()


async def _head(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


def _answer(script: Script, method: str = "GET", read_s: float = 5.0) -> tuple[EngineResponse, bytes, bool]:
    """The answer, its body, and whether its connection was still open once it was released."""

    async def run() -> tuple[EngineResponse, bytes, bool]:
        async with server(script) as url:
            pool = EnginePool(4, wait_s=5.0, connect_s=5.0, read_s=read_s)
            try:
                resp = await pool.request(url, method, "/x", {}, None)
                body = await resp.read()
                resp.release()
                return resp, body, not resp.conn.closed
            finally:
                pool.close()
                await asyncio.sleep(0.05)  # the server's handler sees the close and ends

    return asyncio.run(run())


def test_an_answer_by_length_keeps_its_connection() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Upper: A b\r\n"
            b"Set-Cookie: a\r\nSet-Cookie: b\r\n\r\nhello"
        )
        await reader.read()

    resp, body, kept = _answer(script)
    assert (resp.status, body) == (200, b"hello")
    assert resp.headers.get("X-UPPER") == "A b" and resp.headers.get("content-length") == "5"
    assert ("set-cookie", "b") in resp.headers.items() and resp.headers.get("missing", "d") == "d"
    assert kept  # left open for the next request


def test_a_chunked_answer_arrives_chunk_by_chunk() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
        await reader.read()

    async def run() -> list[bytes]:
        async with server(script) as url:
            pool = EnginePool(4, wait_s=5.0, connect_s=5.0, read_s=5.0)
            resp = await pool.request(url, "POST", "/x", {}, b"{}")
            parts = [c async for c in resp.content.iter_any()]
            assert resp.at_eof()
            resp.release()
            pool.close()
            await asyncio.sleep(0.05)
            return parts

    assert asyncio.run(run()) == [b"first", b"second"]


def test_the_chunks_of_one_read_are_handed_over_together_and_the_reader_woken_once_per_read() -> None:
    """A streaming engine's read carries several chunks (one event each): the reader gets them in one
    piece, woken after the read rather than per chunk (enginehttp.Connection.data_received)."""
    events = [b"data: %d\n\n" % i for i in range(5)]

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.write(b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events))  # one write, one read
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.write(b"0\r\n\r\n")
        await reader.read()

    async def run() -> tuple[list[bytes], int]:
        async with server(script) as url:
            pool = EnginePool(4, wait_s=5.0, connect_s=5.0, read_s=5.0)
            resp = await pool.request(url, "POST", "/x", {}, b"{}")
            wakes = 0
            wake = resp._wake

            def counted() -> None:
                nonlocal wakes
                wakes += 1
                wake()

            resp._wake = counted  # type: ignore[method-assign]
            parts = [c async for c in resp.content.iter_any()]
            resp.release()
            pool.close()
            await asyncio.sleep(0.05)
            return parts, wakes

    parts, wakes = asyncio.run(run())
    assert parts == [b"".join(events)]
    assert wakes == 2  # the read with the five chunks, then the end of the answer


def test_an_answer_without_length_ends_with_the_connection() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it")
        await writer.drain()

    resp, body, kept = _answer(script)
    assert body == b"all of it" and resp.until_eof and not kept


def test_a_head_answer_ends_at_its_headers() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 999\r\n\r\n")  # no body follows a HEAD answer
        await reader.read()

    resp, body, kept = _answer(script, method="HEAD", read_s=0.5)
    assert (resp.status, body) == (200, b"") and not kept


def test_an_interim_answer_is_skipped() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(
            b"HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\n"
            b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
        )
        await reader.read()

    resp, body, _ = _answer(script)
    assert (resp.status, body) == (201, b"ok") and resp.headers.get("x-interim") is None


@pytest.mark.parametrize(
    "wire",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_an_answer_that_breaks_off_is_engine_gone(wire: bytes) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(wire)
        await writer.drain()

    with pytest.raises(EngineGone):
        _answer(script)


def test_an_engine_silent_past_the_read_timeout_is_a_timeout_but_a_slow_one_is_not() -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n")
        for b in b"abcdef":  # 0.9 s in all, never 0.3 s silent
            await asyncio.sleep(0.15)
            writer.write(bytes([b]))
        await reader.read()

    assert _answer(trickle, read_s=0.3)[1] == b"abcdef"

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nabc")
        await asyncio.sleep(2)

    with pytest.raises(TimeoutError):
        _answer(silent, read_s=0.3)


def test_reading_pauses_past_the_limit_and_that_is_not_the_engines_silence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(enginehttp, "PAUSE_BYTES", 4096)
    size = 1 << 20

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"x" * size)
        await writer.drain()
        await reader.read()

    async def run() -> int:
        async with server(script) as url:
            pool = EnginePool(4, wait_s=5.0, connect_s=5.0, read_s=0.3)
            resp = await pool.request(url, "GET", "/x", {}, None)
            await asyncio.sleep(0.2)
            assert resp.paused and resp.buffered < size  # the rest waits in the sockets
            await asyncio.sleep(0.5)  # longer than read_s: paused, so no timeout
            got = 0
            while chunk := await resp.chunk():
                got += len(chunk)
                await asyncio.sleep(0)
            resp.release()
            pool.close()
            await asyncio.sleep(0.05)
            return got

    assert asyncio.run(run()) == size
