"""One request on the fast path (serve/fastpath.py) and what it needs of its connection.

Why a module of its own: the request's state is shared by three parts that each have one job: the
connection's protocol (serve/connections.py), which puts the exchange in uvicorn's `cycle` slot;
the fast path, which runs the request; and the answer writer (serve/fastanswer.py), which writes
its head and body as uvicorn's cycle would. uvicorn's protocol reads and sets the slot's attributes
named in `Exchange` (uvicorn/protocols/http/httptools_impl.py, 0.54.0: l. 116, 248, 327, 349).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Protocol

Scope = MutableMapping[str, Any]


class _NoEvent:
    """uvicorn's protocol sets its cycle's `message_event` when the connection is lost; the fast
    path waits on the connection's Departure instead."""

    __slots__ = ()

    def set(self) -> None:
        pass


class Exchange:
    """One request on the fast path. It stands in uvicorn's `cycle` slot while it runs, with the
    attributes the protocol reads or sets there (response_complete, disconnected, keep_alive,
    message_event), so a pipelined request behind it waits in uvicorn's own queue and a shutdown
    closes the connection after its answer."""

    __slots__ = (
        "body",
        "chunked",
        "disconnected",
        "first_byte",
        "keep_alive",
        "left",
        "message_event",
        "response_complete",
        "scope",
        "start",
        "started",
        "status",
    )

    def __init__(self, scope: Scope, body: bytes, keep_alive: bool, start: float) -> None:
        self.scope = scope
        self.body = body
        self.keep_alive = keep_alive
        self.start = start
        self.response_complete = False
        self.disconnected = False
        self.message_event = _NoEvent()
        self.started = False  # the request's task ran (else its slot is given back by its callback)
        self.status = 0  # the answer's status once its head is written
        self.first_byte: float | None = None
        self.chunked = False
        self.left = 0  # a counted body's bytes still to come

    @property
    def complete(self) -> bool:
        """The answer is all written (disconnect.Sent: a client leaving now cancels nothing)."""
        return self.response_complete


class Connection(Protocol):
    """What the fast path needs of its connection (serve/connections.py's protocol)."""

    def default_headers(self) -> list[tuple[bytes, bytes]]:
        """uvicorn's default headers (date, server), as its server keeps them current."""
        ...

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    async def drained(self) -> None:
        """Back once the client's side may take more (uvicorn's flow control)."""
        ...

    def finished(self, exchange: Exchange) -> None:
        """The request is over (answered, failed or gone): the next one on the connection may start."""
        ...
