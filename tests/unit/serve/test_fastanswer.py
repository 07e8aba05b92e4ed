"""The fast path's answer writer (serve/fastanswer.py): its head is the one uvicorn's own cycle writes
for the headers the usual path would hand it, for any headers (hypothesis against uvicorn's
RequestResponseCycle itself). Whole answers against the usual path, through real sockets:
tests/integration/serve/test_fastpath.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from neuronserve.front.router import RequestRoute
from neuronserve.serve.exchange import Exchange
from neuronserve.serve.fastanswer import AnswerWriter

DEFAULTS = [(b"date", b"Sat, 28 Nov 2026 14:00:00 GMT"), (b"server", b"uvicorn")]
TAGS = ((b"x-neuronserve-worker", b"2"),)


class _Transport:
    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@dataclass
class _Replica:
    index: int


def _uvicorn_head(status: int, headers: list[tuple[bytes, bytes]], keep_alive: bool) -> tuple[bytes, bool]:
    """What uvicorn's cycle writes for this answer start, and its keep-alive after it."""
    transport = _Transport()
    cycle = RequestResponseCycle(
        scope={"method": "POST", "type": "http"},  # type: ignore[typeddict-item]
        transport=transport,  # type: ignore[arg-type]
        flow=FlowControl(transport),  # type: ignore[arg-type]
        logger=None,  # type: ignore[arg-type]
        access_logger=None,  # type: ignore[arg-type]
        access_log=False,
        default_headers=DEFAULTS,
        message_event=asyncio.Event(),
        expect_100_continue=False,
        keep_alive=keep_alive,
        on_response=lambda: None,
    )
    asyncio.run(cycle.send({"type": "http.response.start", "status": status, "headers": headers}))
    return b"".join(transport.out), cycle.keep_alive


_TOKEN = st.text(alphabet="abcdefgHIJKLmnop-_0123456789", min_size=1, max_size=12).map(str.encode)
_NAMES = st.one_of(
    _TOKEN,
    st.sampled_from(
        [
            *(b"content-type", b"Content-Type", b"connection", b"Connection", b"x-request-id"),
            *(b"X-Request-Id", b"transfer-encoding", b"bad name", b"bad:name", b"x-ok"),
        ]
    ),
)
_VALUES = st.one_of(
    st.binary(max_size=20).filter(lambda v: b"\r" not in v and b"\n" not in v),
    st.sampled_from([b"close", b"keep-alive, Close", b"chunked", b"Chunked", b"text/plain", b"a\tb"]),
    st.sampled_from([b"bad\x01value", b"bad\x7fvalue"]),
)


@settings(max_examples=400, deadline=None)
@given(
    status=st.sampled_from([200, 204, 304, 400, 413, 422, 429, 500, 503]),
    headers=st.lists(st.tuples(_NAMES, _VALUES), max_size=6),
    length=st.one_of(st.none(), st.integers(0, 99)),
    keep_alive=st.booleans(),
    replica=st.one_of(st.none(), st.integers(0, 7)),
)
def test_the_head_is_the_one_uvicorn_writes_for_the_usual_paths_headers(
    status: int,
    headers: list[tuple[bytes, bytes]],
    length: int | None,
    keep_alive: bool,
    replica: int | None,
) -> None:
    if length is not None:
        headers = [(b"content-length", str(length).encode()), *headers]
    scope = {"type": "http", "headers": [(b"x-request-id", b"client-1")]}
    route = RequestRoute()
    if replica is not None:
        route.pinned = _Replica(replica)  # type: ignore[assignment]
    # what the usual path's wrappers hand uvicorn: the app's headers, the replica's (ReplicaScope),
    # the id in place of the app's (the gate), the worker's (WorkerTag)
    usual = [h for h in headers if h[0].lower() != b"x-request-id"]
    if replica is not None:
        usual.append((b"x-neuronserve-replica", str(replica).encode()))
    usual += [(b"x-request-id", b"client-1"), *TAGS]
    try:
        expected, expected_keep = _uvicorn_head(status, usual, keep_alive)
    except RuntimeError:  # a bad name or value: refused too (which one is named first may differ)
        with pytest.raises(RuntimeError, match="Invalid HTTP header"):
            AnswerWriter(TAGS).head(DEFAULTS, Exchange(scope, b"", keep_alive, 0.0), route, status, headers)
        return
    exchange = Exchange(scope, b"", keep_alive, 0.0)
    fast = AnswerWriter(TAGS)
    assert fast.head(DEFAULTS, exchange, route, status, headers) == expected
    assert exchange.keep_alive == expected_keep
    # the remembered names change nothing the second time
    assert fast.head(DEFAULTS, Exchange(scope, b"", keep_alive, 0.0), route, status, headers) == expected


def test_the_first_content_length_counts_as_in_uvicorn() -> None:
    headers = [(b"content-length", b"5"), (b"content-length", b"7")]
    scope = {"type": "http", "headers": [(b"x-request-id", b"client-1")]}
    exchange = Exchange(scope, b"", True, 0.0)
    expected, _ = _uvicorn_head(200, [*headers, (b"x-request-id", b"client-1"), *TAGS], True)
    assert AnswerWriter(TAGS).head(DEFAULTS, exchange, RequestRoute(), 200, headers) == expected
    assert exchange.left == 5 and not exchange.chunked
