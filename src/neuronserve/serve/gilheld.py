"""Non-blocking socket calls that keep the GIL, for the probe door's thread (serve/probedoor.py).

Why: every call of Python's socket module releases the GIL around its system call and takes it back
after. With the event loop's thread busy, taking it back means waiting for that thread to be forced
off it, one switch interval each (sys.getswitchinterval), and a probe made five such calls (accept,
recv, send, close, and the selector's register): the "convoy effect" of an I/O thread beside a busy
one (https://bugs.python.org/issue7946). On a non-blocking socket the system call returns at once,
so there is nothing to gain from releasing the GIL around it. ctypes' PyDLL calls a C function
without releasing the GIL (docs.python.org/3/library/ctypes.html, "PyDLL"), so through these a probe
waits for the GIL once, when its thread wakes from the selector.

Linux and glibc's (or any libc's) accept4, recv, send and close, found in the running process.
"""

from __future__ import annotations

import errno
import socket
from typing import Any

try:  # a Python built without ctypes, or a libc without these: AVAILABLE is False (the door stays off)
    import ctypes

    _libc = ctypes.PyDLL(None, use_errno=True)
    _accept4: Any = _libc.accept4
    _accept4.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    _accept4.restype = ctypes.c_int
    _recv: Any = _libc.recv
    _recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _recv.restype = ctypes.c_ssize_t
    _send: Any = _libc.send
    _send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    _send.restype = ctypes.c_ssize_t
    _close: Any = _libc.close
    _close.argtypes = [ctypes.c_int]
    _close.restype = ctypes.c_int
    AVAILABLE = hasattr(socket, "SOCK_NONBLOCK")
except (ImportError, OSError, AttributeError):
    AVAILABLE = False

AGAIN = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR})
ACCEPT_FLAGS = getattr(socket, "SOCK_NONBLOCK", 0) | getattr(socket, "SOCK_CLOEXEC", 0)
MSG_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)  # a closed peer: EPIPE, not SIGPIPE


class Reader:
    """recv into one buffer (the door has one thread)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._buf = ctypes.create_string_buffer(size)

    def recv(self, fd: int) -> bytes | None:
        """Up to `size` bytes; b"" when the peer closed or the connection failed; None: nothing yet."""
        n = _recv(fd, self._buf, self.size, 0)
        if n < 0:
            return None if ctypes.get_errno() in AGAIN else b""
        return ctypes.string_at(self._buf, n)


def accept(fd: int) -> int | None:
    """A new connection's descriptor, non-blocking and close-on-exec; None: none waiting.
    Raises OSError for anything else (EMFILE, ...)."""
    new = int(_accept4(fd, None, None, ACCEPT_FLAGS))
    if new >= 0:
        return new
    err = ctypes.get_errno()
    if err in AGAIN or err == errno.ECONNABORTED:
        return None
    raise OSError(err, errno.errorcode.get(err, str(err)))


def send(fd: int, data: bytes) -> int:
    """Bytes sent (maybe fewer than given); -1 on an error (the peer gone) or a full buffer."""
    return int(_send(fd, data, len(data), MSG_NOSIGNAL))


def close(fd: int) -> None:
    _close(fd)
