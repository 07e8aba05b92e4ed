"""One request of a work kind, read byte by byte: its status, its size on the wire and its token events.

Why: wrk counts the bytes it read, partial responses included, but only the requests it finished. A
256-event stream cut by the end of a round did most of its work, so the work of a stream round is
counted as wrk's bytes divided by the bytes of one whole response (read here over one keep-alive
connection, as wrk sends it), times the events in one response. The events are counted here too,
so a kind whose answer is not what the table claims (an error, fewer events) stops the run.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass


@dataclass
class Sample:
    status: int
    wire_bytes: int
    body: bytes
    events: int


def _read_until(sock: socket.socket, buf: bytearray, token: bytes) -> int:
    while (at := buf.find(token)) < 0:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection mid-response")
        buf += chunk
    return at


def _read_exact(sock: socket.socket, buf: bytearray, n: int) -> None:
    while len(buf) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection mid-response")
        buf += chunk


def request(port: int, path: str, body: dict[str, object], headers: dict[str, str] | None = None) -> Sample:
    raw = json.dumps(body).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(raw)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + raw)
        buf = bytearray()
        end = _read_until(sock, buf, b"\r\n\r\n") + 4
        lines = bytes(buf[: end - 4]).decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        fields = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
        body_out = bytearray()
        pos = end
        if fields.get("transfer-encoding", "").lower() == "chunked":
            while True:
                nl = _read_until_from(sock, buf, pos)
                size = int(bytes(buf[pos:nl]).split(b";")[0], 16)
                pos = nl + 2
                _read_exact(sock, buf, pos + size + 2)
                body_out += buf[pos : pos + size]
                pos += size + 2
                if size == 0:
                    break
        else:
            size = int(fields.get("content-length", "0"))
            _read_exact(sock, buf, pos + size)
            body_out += buf[pos : pos + size]
            pos += size
    return Sample(status, pos, bytes(body_out), count_events(bytes(body_out)))


def _read_until_from(sock: socket.socket, buf: bytearray, pos: int) -> int:
    while (at := buf.find(b"\r\n", pos)) < 0:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection mid-response")
        buf += chunk
    return at


def count_events(body: bytes) -> int:
    """Token events: an OpenAI chunk with a choice, or a TGI / LMI line carrying a `token`."""
    n = 0
    for line in body.split(b"\n"):
        text = line.strip()
        if text.startswith(b"data:"):
            text = text[5:].strip()
        if text.startswith(b"{") and (b'"choices":[{' in text or b'"token":' in text):
            n += 1
    return n
