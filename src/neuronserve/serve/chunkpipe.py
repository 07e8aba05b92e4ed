"""A stream's middle chunks written straight into its HTTP/1.1 response, past the `send` wrappers.

Why: an engine stream passed through the front is one `send` per engine read, and each crossed every
ASGI layer around the app (the replica tag, the worker tag, the gate's exchange) and uvicorn's `send`,
none of which does anything with a middle chunk: they add a header to the start or note the end. On
the OpenAI passthrough, where the front's CPU per event is held to the bare engine's (issue 28), those
layers were a measurable part of each read (docs/PERFORMANCE.md, "A stream's middle chunks").

How: the connection's protocol (serve/connections.py) puts a `ChunkPipe` bound to the request's
uvicorn cycle in the scope's extensions (`front.streaming.PIPE_KEY`). A Stream (front/streaming.py)
sends its start and first chunk through `send` as always, then, while `open()` holds, writes each
chunk here; otherwise (and always for the last message) it uses `send`. `open()` is true only where
uvicorn's own `send` would write the chunk at once, framed as HTTP/1.1 chunked transfer encoding
(RFC 9112 section 7.1): the head is sent, the body is not complete, the framing is chunked (never for
a HEAD request or a Content-Length answer), the client is connected, and its writes are not paused.
A paused or gone client sends the chunk through `send`, whose flow control waits for the client to
read (or drops the chunk once the client is gone): the slow-reader bound is uvicorn's, unchanged.

The attributes read are uvicorn's `RequestResponseCycle`'s (uvicorn/protocols/http/httptools_impl.py,
`send`: `response_started`, `response_complete`, `chunked_encoding`, `disconnected`, `flow`,
`transport`). A cycle without them gets no pipe (`attach`), and the stream goes through `send`.
"""

from __future__ import annotations

from typing import Any

from neuronserve.front.streaming import PIPE_KEY

_NEEDED = (
    "scope",
    "response_started",
    "response_complete",
    "chunked_encoding",
    "disconnected",
    "flow",
    "transport",
)
_FITS: dict[type, bool] = {}  # per cycle class: whether its instances have every attribute of _NEEDED


class ChunkPipe:
    """Writes one chunk of an open chunked response; `open()` says whether it may."""

    __slots__ = ("_cycle",)

    def __init__(self, cycle: Any) -> None:
        self._cycle = cycle

    def open(self) -> bool:
        cycle = self._cycle
        return (
            cycle.response_started
            and not cycle.response_complete
            and cycle.chunked_encoding is True
            and not cycle.disconnected
            and not cycle.flow.write_paused
        )

    def write(self, body: bytes) -> None:
        """One chunk, framed as uvicorn's `send` frames it; an empty body would end the response, so it
        is not written."""
        if body:
            self._cycle.transport.write(b"%x\r\n%b\r\n" % (len(body), body))


def attach(scope: Any, cycle: Any) -> None:
    """Give the request of `scope` its pipe when `cycle` is that request's and has what the pipe reads."""
    fits = _FITS.get(type(cycle))
    if fits is None:
        fits = _FITS[type(cycle)] = all(hasattr(cycle, name) for name in _NEEDED)
    if not fits or cycle.scope is not scope:
        return
    extensions: dict[str, Any] | None = scope.get("extensions")
    if extensions is None:
        extensions = scope["extensions"] = {}
    extensions[PIPE_KEY] = ChunkPipe(cycle)
