"""A client connection's transport whose writes in one turn of the event loop leave as one write.

Why: uvicorn writes a response's status line and headers when the app sends `http.response.start`,
and its body when the app sends the body: two system calls (two TCP segments, two wake-ups of the
client) for every answer that fits in one. Measured with bench/bench_ceiling.py (docs/PERFORMANCE.md,
"Front ceiling"), coalescing them cut the front's CPU per non-streamed request by about a fifth. The
writes an answer makes in one turn (head and body; a stream's head and its first events when they
are ready together) are joined and written when the turn ends (`call_soon`), in the order they were
made; `close` and `write_eof` send what is pending first, `abort` drops it, as a transport would.

Why every write waits for the end of the turn, a stream's events too (tried the other way: only a
head waits, the rest leaves at once): under load the answers of a turn then leave together after its
reads, and the clients' next requests arrive together for the next turn. Measured A/B, writing the
rest at once cost more front CPU per request (262 vs 247 us) and per stream event (14.1 vs 11.2 us).
A write waits at most one turn of the loop: microseconds when it is idle.

The server's protocol (serve/connections.py) gets this in place of the socket's transport, so every
write of the connection (uvicorn's own error answers too) goes through the one queue and keeps its
order. A write made after the connection was lost is dropped, as uvicorn itself never writes then.
"""

from __future__ import annotations

import asyncio
from typing import Any


class CorkedTransport:
    """Wraps an asyncio transport: `write` is deferred to the end of the loop's turn and joined."""

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def _flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        if not self._transport.is_closing():  # lost meanwhile: nobody to write to
            self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(d) for d in self._pending)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:  # reading, extra info, protocol, flow control limits
        return getattr(self._transport, name)
