"""The fast path's parts (serve/fastpath.py, its answer writer serve/fastanswer.py, its exchange
serve/exchange.py): its answer head is the one uvicorn's own cycle writes for
the headers the usual path would hand it, for any headers (hypothesis against uvicorn's
RequestResponseCycle itself); its `receive`; its slot accounting. The whole path against the usual
one, through real sockets: tests/integration/serve/test_fastpath.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from neuronserve.front.disconnect import Departure
from neuronserve.front.gate import Gate
from neuronserve.front.router import RequestRoute
from neuronserve.front.state import Phase, ServerState
from neuronserve.serve.exchange import Exchange
from neuronserve.serve.fastanswer import AnswerWriter
from neuronserve.serve.fastpath import PATHS, FastPath, _Receive

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


async def _nothing(*_: Any) -> Any:
    raise AssertionError("not called")


def _fast(state: ServerState | None = None, limit: int = 2) -> FastPath:
    if state is None:
        state = ServerState()
        state.move(Phase.LOADING)
        state.move(Phase.READY)
    gate = Gate(_nothing, state, limit)
    return FastPath(gate, dict.fromkeys(PATHS, _nothing), TAGS)


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


def test_receive_gives_the_body_once_then_waits_for_the_client_to_leave() -> None:
    async def go() -> list[Any]:
        departure = Departure()
        receive = _Receive(Exchange({}, b"body", True, 0.0), departure)
        first = await receive()
        later = asyncio.ensure_future(receive())
        await asyncio.sleep(0.01)
        waiting = not later.done()
        departure.fire()
        return [first, waiting, await later, await receive()]

    first, waiting, later, again = asyncio.run(go())
    assert first == {"type": "http.request", "body": b"body", "more_body": False}
    assert waiting and later == again == {"type": "http.disconnect"}


def test_admission_takes_a_slot_only_when_ready_and_free() -> None:
    state = ServerState()
    fast = _fast(state, limit=1)
    assert not fast.open() and not fast.admit()  # STAGING: the gate answers
    state.move(Phase.LOADING)
    state.move(Phase.READY)
    assert fast.open() and fast.admit() and fast.gate.limiter.in_flight == 1
    assert not fast.admit()  # the one slot is taken: the gate's 429
    exchange = Exchange({}, b"", True, 0.0)
    fast.unstarted(exchange)  # a task cancelled before it ran gives its slot back
    assert fast.gate.limiter.in_flight == 0
    assert fast.admit()
    exchange.started = True
    fast.unstarted(exchange)  # a task that ran gives it back itself
    assert fast.gate.limiter.in_flight == 1
    state.move(Phase.DRAINING)
    assert not fast.open()


def test_the_first_content_length_counts_as_in_uvicorn() -> None:
    headers = [(b"content-length", b"5"), (b"content-length", b"7")]
    scope = {"type": "http", "headers": [(b"x-request-id", b"client-1")]}
    exchange = Exchange(scope, b"", True, 0.0)
    expected, _ = _uvicorn_head(200, [*headers, (b"x-request-id", b"client-1"), *TAGS], True)
    assert AnswerWriter(TAGS).head(DEFAULTS, exchange, RequestRoute(), 200, headers) == expected
    assert exchange.left == 5 and not exchange.chunked
