"""A loopback TCP proxy that can "die": in front of the session's S3 server, killed mid-transfer.

Killing the proxy is what a client sees when its S3 endpoint goes away: every open connection is
reset (SO_LINGER 0) and new connections are refused, while the data behind it (the moto server)
survives for the next start, as S3's would.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


class TcpProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._dead = False
        threading.Thread(target=self._accept, name="tcpproxy", daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._dead:
                    client.close()
                    upstream.close()
                    return
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def kill(self) -> None:
        """Reset every connection and stop listening (connection refused from now on)."""
        with self._lock:
            self._dead = True
            conns, self._conns = self._conns, []
        self._listener.close()
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
