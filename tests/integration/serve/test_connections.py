"""The front's connection guards (serve/connections.py) on a real uvicorn over a real 127.0.0.1 socket,
in front of a trivial ASGI app: the header size limit (431), the header deadline (closed unanswered),
and the connection bound (/ping still answered from the reserve, other routes 503, beyond it closed).
The same guards through the whole server are tests/integration/test_hostile_clients.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import pytest
from tests.support.uvicornrun import serving

from neuronserve.serve.connections import PING_RESERVE, ConnectionLimits

pytestmark = pytest.mark.integration  # uvicorn on a real port


async def ok_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def exchange(port: int, request: bytes, *, wait_s: float = 5.0) -> bytes:
    """What the server sends back to `request` until it closes the connection (or `wait_s` passes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), wait_s)
    finally:
        writer.close()


def _body(answer: bytes) -> dict[str, Any]:
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])  # type: ignore[no-any-return]


def test_a_request_within_the_limits_is_served() -> None:
    async def run() -> bytes:
        async with serving(ok_app, ConnectionLimits(2.0, 4096, 8)) as port:
            return await exchange(port, b"GET /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")

    answer = asyncio.run(run())
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"\r\n\r\nok")


@pytest.mark.parametrize("pieces", [1, 64])
def test_headers_over_the_limit_get_431_naming_the_variable(pieces: int) -> None:
    """One piece, or many small ones (counted as they arrive, before the parser joins them). The client
    stops just past the limit: bytes it sent after the server closed would reset the connection."""
    request = b"GET /x HTTP/1.1\r\nhost: a\r\nx-big: " + b"a" * 8000 + b"\r\n\r\n"
    sent = request if pieces == 1 else request[:4200]

    async def run() -> bytes:
        async with serving(ok_app, ConnectionLimits(5.0, 4096, 8)) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            step = -(-len(sent) // pieces)
            for i in range(0, len(sent), step):
                writer.write(sent[i : i + step])
                await writer.drain()
                await asyncio.sleep(0.002)
            answer = await asyncio.wait_for(reader.read(), 5)
            writer.close()
            return answer

    answer = asyncio.run(run())
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]
    assert "NEURONSERVE_MAX_HEADER_BYTES" in _body(answer)["error"]["message"]


def test_headers_slower_than_the_deadline_close_the_connection_unanswered() -> None:
    async def run() -> tuple[bytes, float]:
        async with serving(ok_app, ConnectionLimits(0.5, 4096, 8)) as port:
            start = time.monotonic()
            answer = await exchange(port, b"GET /x HTTP/1.1\r\nhost: a\r\n", wait_s=10)  # headers never end
            return answer, time.monotonic() - start

    answer, took = asyncio.run(run())
    assert answer == b""
    assert 0.4 < took < 5


def test_over_the_bound_only_ping_is_served_then_connections_are_closed() -> None:
    limit = 2

    async def run() -> tuple[bytes, bytes, bytes]:
        async with serving(ok_app, ConnectionLimits(30.0, 4096, limit)) as port:
            held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(limit)]
            await asyncio.sleep(0.1)
            busy = await exchange(port, b"GET /x HTTP/1.1\r\nhost: a\r\n\r\n")
            ping = await exchange(port, b"GET /ping HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
            held += [await asyncio.open_connection("127.0.0.1", port) for _ in range(PING_RESERVE)]
            await asyncio.sleep(0.1)
            refused = b""
            with contextlib.suppress(ConnectionError):
                refused = await exchange(port, b"GET /ping HTTP/1.1\r\nhost: a\r\n\r\n")
            for _, writer in held:
                writer.close()
            return busy, ping, refused

    busy, ping, refused = asyncio.run(run())
    assert busy.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in busy.lower()
    assert "NEURONSERVE_MAX_CONNECTIONS" in _body(busy)["error"]["message"]
    assert ping.startswith(b"HTTP/1.1 200 ")
    assert refused == b""  # beyond the /ping reserve: closed as accepted


async def body_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the whole body, then answers its length."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    answer = str(size).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(answer))]}
    )
    await send({"type": "http.response.body", "body": answer})


def test_a_pipelined_request_whose_head_shares_a_read_with_a_large_body_is_answered() -> None:
    """The end of a large body and the start of the next request's head in one read, the rest of the
    head in a later one: only the head's bytes count against the header limit (the whole read was
    counted as that head: a 431, the connection closed, the first answer lost)."""
    body = b"x" * 200_000
    first = b"POST /up HTTP/1.1\r\nhost: a\r\ncontent-length: %d\r\n\r\n" % len(body)
    second = b"GET /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n"

    async def run() -> bytes:
        async with serving(body_app, ConnectionLimits(5.0, 4096, 8)) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(first + body[:-16_000])
            await writer.drain()
            await asyncio.sleep(0.2)  # read by the server: the rest comes in one segment with the
            writer.write(body[-16_000:] + second[:20])  # start of the next head, whose end comes later
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.write(second[20:])
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 5)
            writer.close()
            return answer

    answer = asyncio.run(run())
    assert answer.count(b"HTTP/1.1 200 ") == 2, answer[:300]
    assert b"\r\n\r\n200000HTTP/1.1 200 " in answer and answer.endswith(b"\r\n\r\n0"), answer[-200:]


@pytest.mark.parametrize("path", ["/invocations", "/v1/completions", "/ping", "/x"])
def test_an_absurd_content_length_is_one_400_on_every_path(path: str) -> None:
    """4,300 digits and more are beyond Python's int() (llhttp takes leading zeros): refused at the
    connection, the same for every route, before any reads it."""
    request = b"POST %s HTTP/1.1\r\nhost: a\r\ncontent-length: %s5\r\n\r\nhello" % (
        path.encode(),
        b"0" * 5000,
    )

    async def run() -> bytes:
        async with serving(body_app, ConnectionLimits(5.0, 65536, 8)) as port:
            return await exchange(port, request)

    answer = asyncio.run(run())
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert "Content-Length" in _body(answer)["error"]["message"]
    assert b"connection: close" in answer
