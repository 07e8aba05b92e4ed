"""serve/corking.py over a real socket pair on a real event loop: the writes of one turn leave as one
write, in order; close and write_eof send what is pending first, abort drops it; a write after the
connection is lost is dropped quietly; everything else is the wrapped transport's."""

from __future__ import annotations

import asyncio
import socket

from neuronserve.serve.corking import CorkedTransport


class _Recorder(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]


async def _pair() -> tuple[CorkedTransport, socket.socket, list[bytes]]:
    """A corked transport on one end of a socket pair, the other end, and the writes that reached the
    real transport (one entry per real write)."""
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(_Recorder, ours)
    real_writes: list[bytes] = []
    real_write = transport.write

    def spy(data: bytes) -> None:
        real_writes.append(bytes(data))
        real_write(data)

    transport.write = spy  # type: ignore[method-assign]
    return CorkedTransport(transport, loop), theirs, real_writes  # type: ignore[arg-type]


async def _read(sock: socket.socket) -> bytes:
    await asyncio.sleep(0.05)
    try:
        return sock.recv(65536)
    except BlockingIOError:
        return b""


def test_the_writes_of_one_turn_leave_as_one() -> None:
    async def run() -> None:
        corked, theirs, writes = await _pair()
        corked.write(b"HTTP/1.1 200 OK\r\n\r\n")
        corked.write(b"")
        corked.writelines([b"body", b"!"])
        assert writes == [] and corked.get_write_buffer_size() == 24  # still pending this turn
        assert await _read(theirs) == b"HTTP/1.1 200 OK\r\n\r\nbody!"
        assert writes == [b"HTTP/1.1 200 OK\r\n\r\nbody!"]
        corked.write(b"next")
        await asyncio.sleep(0)
        corked.write(b"turn")
        assert await _read(theirs) == b"nextturn" and writes[1:] == [b"next", b"turn"]
        corked.close()

    asyncio.run(run())


def test_close_and_write_eof_send_what_is_pending_abort_drops_it() -> None:
    async def run() -> None:
        corked, theirs, _ = await _pair()
        corked.write(b"last words")
        corked.write_eof()
        assert await _read(theirs) == b"last words"
        corked.close()

        corked, theirs, _ = await _pair()
        corked.write(b"bye")
        corked.close()
        assert corked.is_closing() and await _read(theirs) == b"bye"

        corked, theirs, writes = await _pair()
        corked.write(b"never")
        corked.abort()
        await asyncio.sleep(0.05)
        assert writes == [] and theirs.recv(100) == b""  # closed, nothing sent

    asyncio.run(run())


def test_a_write_after_the_connection_is_lost_is_dropped() -> None:
    async def run() -> None:
        corked, theirs, writes = await _pair()
        assert corked.get_extra_info("socket") is not None  # the wrapped transport's, delegated
        errors: list[object] = []
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: errors.append(ctx))
        corked.write(b"late")
        corked._transport.close()  # lost before the turn ends
        await asyncio.sleep(0.05)  # the flush finds it closing: nothing written, nothing raised
        assert writes == [] and errors == []
        theirs.close()

    asyncio.run(run())
