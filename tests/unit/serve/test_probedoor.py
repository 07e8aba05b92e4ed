"""The probe door's response bytes (serve/probedoor.py `response_bytes`): uvicorn's shape. What the door
answers and hands on: tests/unit/serve/test_doorcore.py."""

from __future__ import annotations

from neuronserve.serve.probedoor import response_bytes


def test_response_bytes_are_uvicorns_shape() -> None:
    got = response_bytes(503, [(b"Date", b"d"), (b"content-type", b"application/json")], b"{}", close=True)
    assert got == (
        b"HTTP/1.1 503 Service Unavailable\r\ndate: d\r\ncontent-type: application/json\r\n"
        b"connection: close\r\n\r\n{}"
    )
