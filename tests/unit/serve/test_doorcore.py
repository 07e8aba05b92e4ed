"""What the probe door answers itself and what it hands to the loop (serve/doorcore.py `classify`, for
the thread door and the door's process alike). Through a real server, with the loop blocked:
tests/integration/serve/test_probedoor.py and test_doorprocess.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuronserve.serve.doorcore import OTHER, READ_BYTES, WAIT, Probe, classify

PING = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
CLOSING = b"GET /ping HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (PING, Probe("/ping", len(PING), close=False)),
        (b"GET /live HTTP/1.1\r\n\r\n", Probe("/live", 22, close=False)),
        (CLOSING, Probe("/ping", len(CLOSING), close=True)),
        (PING + b"POST /invocations", Probe("/ping", len(PING), close=False)),  # pipelined: the rest waits
        (b"G", WAIT),
        (b"GET /pi", WAIT),
        (b"GET /ping HTTP/1.1\r\nHost: x\r\n", WAIT),
        (b"POST /ping HTTP/1.1\r\n\r\n", OTHER),
        (b"GET /ping?x=1 HTTP/1.1\r\n\r\n", OTHER),
        (b"GET /ping HTTP/1.0\r\n\r\n", OTHER),
        (b"GET /pingx HTTP/1.1\r\n\r\n", OTHER),
        (b"HEAD /live HTTP/1.1\r\n\r\n", OTHER),
        (b"GET /ping HTTP/1.1\r\nContent-Length: 0\r\n\r\n", OTHER),
        (b"GET /ping HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", OTHER),
        (b"GET /ping HTTP/1.1\r\nExpect: 100-continue\r\n\r\n", OTHER),
        (b"GET /ping HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", OTHER),
        (b"GET /ping HTTP/1.1\r\nno colon\r\n\r\n", OTHER),
        (b"GET /ping HTTP/1.1\r\n folded: x\r\n\r\n", OTHER),
        (b"GET /ping HTTP/1.1\r\nx: a\x01b\r\n\r\n", OTHER),
        (b"GET /ping HTTP/1.1\r\nx: " + b"a" * READ_BYTES, OTHER),  # large: the loop's limits take over
    ],
)
def test_classify(data: bytes, expected: object) -> None:
    assert classify(data) == expected


@given(st.binary(max_size=64))
def test_bytes_that_do_not_begin_a_probe_line_go_to_the_loop(data: bytes) -> None:
    verdict = classify(data)
    begins = any(
        line.startswith(data) or data.startswith(line)
        for line in (b"GET /ping HTTP/1.1\r\n", b"GET /live HTTP/1.1\r\n")
    )
    assert verdict == OTHER or begins


@given(st.binary(min_size=1, max_size=200))
def test_a_probe_head_is_never_longer_than_the_bytes(tail: bytes) -> None:
    verdict = classify(PING[:-2] + tail)
    if isinstance(verdict, Probe):
        assert verdict.head_len <= len(PING) - 2 + len(tail)
