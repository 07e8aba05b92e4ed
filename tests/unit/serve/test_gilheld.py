"""serve/gilheld.py's socket calls on real sockets over 127.0.0.1: what each returns when there is
nothing, something, or a closed peer."""

from __future__ import annotations

import os
import socket

import pytest

from neuronserve.serve import gilheld


def test_accept_recv_send_close_on_a_real_connection() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(4)
        listening.setblocking(False)
        assert gilheld.accept(listening.fileno()) is None  # nobody waiting
        client = socket.create_connection(listening.getsockname())
        fd = None
        for _ in range(100):
            fd = gilheld.accept(listening.fileno())
            if fd is not None:
                break
        assert fd is not None
        assert not os.get_inheritable(fd) and not os.get_blocking(fd)
        reader = gilheld.Reader(8)
        assert reader.recv(fd) is None  # nothing sent yet
        client.sendall(b"0123456789")
        client.settimeout(5)
        got = b""
        while len(got) < 10:
            chunk = reader.recv(fd)
            got += chunk or b""
        assert got == b"0123456789"  # in pieces of at most 8
        assert gilheld.send(fd, b"pong") == 4
        assert client.recv(4) == b"pong"
        client.close()
        for _ in range(100):
            if reader.recv(fd) == b"":
                break
        else:
            pytest.fail("the peer's close was never seen")
        assert gilheld.send(fd, b"x" * 1_000_000) in (-1, *range(1, 1_000_001))  # EPIPE, never SIGPIPE
        gilheld.close(fd)
        with pytest.raises(OSError):
            os.fstat(fd)


def test_accept_on_a_closed_descriptor_raises() -> None:
    sock = socket.socket()
    fd = sock.detach()
    gilheld.close(fd)
    with pytest.raises(OSError):
        gilheld.accept(fd)
