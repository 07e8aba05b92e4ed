"""front/streaming.py: a Stream sends what Starlette's StreamingResponse sends (same status line headers,
same chunks), and however it ends (to the last chunk, cancelled by the gate, or a send that fails) its
chunks' generator is closed and `closing` runs at once, on the request's task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from starlette.responses import StreamingResponse

from neuronserve.front.streaming import Stream


def _chunks(log: list[str], n: int = 3, pause: float = 0.0) -> AsyncGenerator[bytes, None]:
    async def gen() -> AsyncGenerator[bytes, None]:
        try:
            for i in range(n):
                if pause:
                    await asyncio.sleep(pause)
                yield f"data: {i}\n\n".encode()
        finally:
            log.append("generator closed")

    return gen()


def test_a_stream_sends_the_headers_and_chunks_of_a_streaming_response() -> None:
    sent: list[dict[str, Any]] = []
    log: list[str] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        raise AssertionError("a Stream never listens: the gate watches for the disconnect")

    stream = Stream(
        _chunks(log), 201, {"x-a": "1"}, media_type="text/event-stream", closing=lambda: log.append("closing")
    )
    asyncio.run(stream({"type": "http"}, receive, send))
    reference = StreamingResponse(_chunks([]), 201, {"x-a": "1"}, media_type="text/event-stream")
    assert sent[0] == {"type": "http.response.start", "status": 201, "headers": reference.raw_headers}
    assert (b"content-type", b"text/event-stream; charset=utf-8") in reference.raw_headers
    assert [m["body"] for m in sent[1:]] == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n", b""]
    assert [m["more_body"] for m in sent[1:]] == [True, True, True, False]
    assert log == ["generator closed", "closing"]


def test_a_cancelled_stream_closes_its_generator_and_runs_closing_at_once() -> None:
    log: list[str] = []
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def run() -> None:
        stream = Stream(_chunks(log, n=100, pause=0.05), closing=lambda: log.append("closing"))
        task = asyncio.ensure_future(stream({"type": "http"}, send, send))  # type: ignore[arg-type]
        await asyncio.sleep(0.12)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert log == ["generator closed", "closing"]  # before the task's caller gets control back

    asyncio.run(run())
    assert 2 <= len(sent) <= 4  # the start and a chunk or two, not the end


def test_closing_runs_when_the_client_is_gone_before_the_first_chunk() -> None:
    log: list[str] = []

    async def send(message: dict[str, Any]) -> None:
        raise OSError("gone")

    async def run() -> None:
        stream = Stream(_chunks(log), closing=lambda: log.append("closing"))
        with pytest.raises(OSError, match="gone"):
            await stream({"type": "http"}, send, send)  # type: ignore[arg-type]

    asyncio.run(run())
    assert log == ["closing"]  # the generator never started: nothing of it to close
