"""A streamed answer, sent chunk by chunk from the request's own task.

Why not Starlette's StreamingResponse as it is: under ASGI spec 2.3 (what uvicorn's httptools protocol
announces) it runs every stream in an anyio task group, beside a second task that waits for the
client's disconnect, and a synchronous background task (the engine response's release) goes to a
worker thread. Per stream that was two tasks, a task group and a thread hand-over, and per chunk one
more wrapper around `send` (docs/PERFORMANCE.md, "Front ceiling"). The gate already cancels the
request's task when its client goes away (front/disconnect.py), which is all the listening task was
for; the cancellation lands in this loop, whose `finally` closes the chunks' generator (its own
`finally` releases the engine connection) and runs `closing`, on this task, at once.

The headers, status and media type are Starlette's own (`init_headers`): a client sees the same bytes.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class Stream(StreamingResponse):
    """StreamingResponse's headers and chunks, without its task group or background thread."""

    body_iterator: AsyncGenerator[bytes, None]

    def __init__(
        self,
        content: AsyncGenerator[bytes, None],
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
        closing: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(content, status_code, headers, media_type)
        self.closing = closing  # runs however the stream ends (the engine response's release)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            try:
                await self.body_iterator.aclose()
            finally:
                if self.closing is not None:
                    self.closing()
