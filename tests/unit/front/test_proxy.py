"""The engine client (front/proxy.py) against a real aiohttp stand-in engine on 127.0.0.1: what is
forwarded, how engine trouble becomes 503/504, and how a stream that breaks ends in-band."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest
from aiohttp import web
from tests.support.aiohttp_engine import engine

from neuronserve.front import proxy
from neuronserve.front.errors import EngineTimeout, EngineUnreachable, error_body


def test_pool_size_is_the_setting_else_the_gate_plus_headroom() -> None:
    assert proxy.pool_size(6, 10) == 10
    assert proxy.pool_size(0) == proxy.UNLIMITED_POOL
    assert proxy.pool_size(6) == proxy.MIN_POOL
    assert proxy.pool_size(500) == 500 + proxy.POOL_HEADROOM


def test_hop_by_hop_and_framing_headers_are_not_forwarded() -> None:
    got = proxy.forward_headers(
        [
            ("Host", "x"),
            ("Content-Length", "3"),
            ("Expect", "100-continue"),
            ("Connection", "keep-alive"),
            ("Content-Type", "application/json"),
            ("X-Request-Id", "r1"),
            ("Authorization", "Bearer t"),
        ]
    )
    assert got == {"Content-Type": "application/json", "X-Request-Id": "r1", "Authorization": "Bearer t"}


def test_send_forwards_method_path_query_body_and_a_unique_engine_id() -> None:
    seen: list[dict[str, Any]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(
            {
                "method": request.method,
                "path_qs": request.raw_path,
                "body": await request.read(),
                "rid": request.headers.get("x-request-id"),
            }
        )
        return web.json_response({"usage": {"prompt_tokens": 3}}, headers={"Server": "engine", "X-E": "1"})

    async def run() -> tuple[int, bytes, dict[str, str], dict[str, Any]]:
        async with engine(record) as url:
            client = proxy.make_client(url, 10.0, 4)
            try:
                resp = await proxy.send(
                    client,
                    "POST",
                    "/v1/completions",
                    headers={"x-request-id": "c"},
                    content=b"{}",
                    params="a=%20",
                )
                usage: dict[str, Any] = {}
                relayed = await proxy.relay(resp, usage.update)
                again = await proxy.send(client, "POST", "/v1/completions", headers={"x-request-id": "c"})
                await proxy.read_body(again)
                return relayed.status_code, bytes(relayed.body), dict(relayed.headers), usage
            finally:
                await client.aclose()

    status, body, headers, usage = asyncio.run(run())
    assert status == 200 and json.loads(body) == {"usage": {"prompt_tokens": 3}}
    assert usage == {"prompt_tokens": 3}
    assert headers.get("x-e") == "1" and "server" not in headers  # the engine's Server header is dropped
    assert [s["method"] for s in seen] == ["POST", "POST"]
    assert seen[0]["path_qs"] == "/v1/completions?a=%20" and seen[0]["body"] == b"{}"
    rids = [s["rid"] for s in seen]
    assert all(r.startswith("c-") for r in rids) and rids[0] != rids[1]


def test_an_engine_that_refuses_connections_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there

    async def run() -> None:
        client = proxy.make_client(f"http://127.0.0.1:{port}", 5.0, 4)
        try:
            await proxy.send(client, "GET", "/health")
        finally:
            await client.aclose()

    with pytest.raises(EngineUnreachable, match="the engine is unreachable"):
        asyncio.run(run())


def test_an_engine_silent_past_the_deadline_is_a_timeout() -> None:
    async def silent(request: web.Request) -> web.Response:
        await asyncio.sleep(1.5)
        return web.Response(text="late")

    async def run() -> None:
        async with engine(silent) as url:
            client = proxy.make_client(url, 0.3, 4)
            try:
                await proxy.send(client, "GET", "/v1/models")
            finally:
                await client.aclose()

    with pytest.raises(EngineTimeout, match="did not answer /v1/models in time"):
        asyncio.run(run())


def test_a_stream_that_stalls_ends_with_an_in_band_error_event() -> None:
    async def stalling(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"n": 1}\n\n')
        await asyncio.sleep(1.5)
        return resp

    async def run() -> list[bytes]:
        async with engine(stalling) as url:
            client = proxy.make_client(url, 0.5, 4)
            try:
                resp = await proxy.send(client, "POST", "/v1/completions", content=b"{}")
                out = await proxy.relay(resp)
                return [bytes(c) async for c in out.body_iterator]  # type: ignore[attr-defined]
            finally:
                await client.aclose()

    parts = asyncio.run(run())
    assert parts[0] == b'data: {"n": 1}\n\n'
    last = parts[-1].decode()
    assert last.startswith("data: ") and last.endswith("\n\n")
    assert json.loads(last.removeprefix("data: ")) == error_body(
        504, "the engine stopped sending (no data within SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS)"
    )


def test_error_event_framing() -> None:
    line = proxy.error_event(502, "gone", jsonlines=True)
    assert line.endswith(b"}\n") and json.loads(line) == error_body(502, "gone")
    sse = proxy.error_event(502, "gone", jsonlines=False)
    assert sse.startswith(b"data: {") and sse.endswith(b"}\n\n")
    assert json.loads(sse.removeprefix(b"data: ")) == error_body(502, "gone")
