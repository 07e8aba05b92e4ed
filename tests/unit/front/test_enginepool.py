"""front/enginepool.py against raw HTTP/1.1 servers on 127.0.0.1: the request bytes, connections reused
and bounded, the wait for a free one bounded, an idle connection the engine closed meanwhile retried on
a new one, and a cancelled request closing its connection (how the engine learns to abort)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from neuronserve.front.enginehttp import Unreached
from neuronserve.front.enginepool import EnginePool, request_head

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@asynccontextmanager
async def server(script: Script, seen: list[str]) -> AsyncIterator[str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append("accept")
        try:
            await script(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            seen.append("closed")
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    finally:
        srv.close()
        await asyncio.sleep(0.05)


async def keep_answering(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while await reader.readuntil(b"\r\n\r\n"):
        writer.write(OK)


def test_the_request_head_is_what_aiohttp_wrote() -> None:
    key = ("127.0.0.1", 8081)
    head = request_head(
        "POST", "/v1/completions?a=%20", key, {"content-type": "application/json", "Host": "x"}, b"{}"
    )
    assert head == (
        b"POST /v1/completions?a=%20 HTTP/1.1\r\nHost: 127.0.0.1:8081\r\ncontent-type: application/json\r\n"
        b"Accept: */*\r\nContent-Length: 2\r\n\r\n"
    )
    assert request_head("GET", "/v1/models", key, {"accept": "text/plain"}, None) == (
        b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:8081\r\naccept: text/plain\r\n\r\n"
    )
    assert b"Content-Type: application/octet-stream\r\nContent-Length: 1\r\n" in request_head(
        "PUT", "/", key, None, b"x"
    )
    assert b"Content-Length: 0\r\n" in request_head("DELETE", "/", key, None, None)
    with pytest.raises(ValueError, match="line break"):
        request_head("GET", "/", key, {"x-a": "1\r\nx-forged: 1"}, None)


def test_one_connection_serves_request_after_request() -> None:
    seen: list[str] = []

    async def run() -> list[int]:
        async with server(keep_answering, seen) as url:
            pool = EnginePool(8, wait_s=5.0, connect_s=5.0, read_s=5.0)
            statuses = []
            for _ in range(5):
                resp = await pool.request(url, "GET", "/health", None, None)
                await resp.read()
                resp.release()
                statuses.append(resp.status)
            pool.close()
            return statuses

    assert asyncio.run(run()) == [200] * 5
    assert seen.count("accept") == 1


def test_requests_beyond_the_limit_wait_for_a_connection_within_the_deadline() -> None:
    seen: list[str] = []
    open_now = [0, 0]  # open, most at once

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        open_now[0] += 1
        open_now[1] = max(open_now[1], open_now[0])
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                await asyncio.sleep(0.1)
                writer.write(OK)
        finally:
            open_now[0] -= 1

    async def one(pool: EnginePool, url: str) -> int:
        resp = await pool.request(url, "GET", "/x", None, None)
        await resp.read()
        resp.release()
        return resp.status

    async def run() -> None:
        async with server(slow, seen) as url:
            pool = EnginePool(2, wait_s=5.0, connect_s=5.0, read_s=5.0)
            assert await asyncio.gather(*(one(pool, url) for _ in range(8))) == [200] * 8
            short = EnginePool(1, wait_s=0.05, connect_s=5.0, read_s=5.0)
            with pytest.raises(TimeoutError, match="no connection to the engine came free"):
                await asyncio.gather(*(one(short, url) for _ in range(2)))
            await asyncio.sleep(0.2)
            pool.close()
            short.close()

    asyncio.run(run())
    assert open_now[1] <= 3 and seen.count("accept") <= 3  # 2 for the first pool, 1 for the second


def test_an_idle_connection_the_engine_closed_is_replaced_without_an_error() -> None:
    seen: list[str] = []

    async def one_answer_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(OK)  # keep-alive as far as the client knows, then closed: an idle timeout

    async def run() -> list[int]:
        async with server(one_answer_then_close, seen) as url:
            pool = EnginePool(4, wait_s=5.0, connect_s=5.0, read_s=5.0)
            out = []
            for _ in range(3):
                resp = await pool.request(url, "POST", "/v1/completions", None, b"{}")
                await resp.read()
                resp.release()
                out.append(resp.status)
            pool.close()
            return out

    assert asyncio.run(run()) == [200, 200, 200]
    assert seen.count("accept") == 3


def test_nothing_listening_is_unreached() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def run() -> None:
        pool = EnginePool(4, wait_s=5.0, connect_s=5.0, read_s=5.0)
        await pool.request(f"http://127.0.0.1:{port}", "GET", "/health", None, None)

    with pytest.raises(Unreached, match="cannot connect"):
        asyncio.run(run())


def test_a_cancelled_request_closes_its_connection() -> None:
    seen: list[str] = []

    async def never(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.read()  # until the front closes: the engine's cue to abort

    async def run() -> None:
        async with server(never, seen) as url:
            pool = EnginePool(4, wait_s=5.0, connect_s=5.0, read_s=60.0)
            task = asyncio.ensure_future(pool.request(url, "POST", "/v1/completions", None, b"{}"))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.sleep(0.1)
            assert seen == ["accept", "closed"]
            assert pool.open == 0 and not any(pool.idle.values())
            pool.close()

    asyncio.run(run())
