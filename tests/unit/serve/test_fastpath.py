"""The fast path's parts (serve/fastpath.py): its `receive`; its slot accounting. Its answer head:
test_fastanswer.py. The whole path against the usual one, through real sockets:
tests/integration/serve/test_fastpath.py."""

from __future__ import annotations

import asyncio
from typing import Any

from neuronserve.front.disconnect import Departure
from neuronserve.front.gate import Gate
from neuronserve.front.state import Phase, ServerState
from neuronserve.serve.exchange import Exchange
from neuronserve.serve.fastpath import PATHS, FastPath, _Receive

TAGS = ((b"x-neuronserve-worker", b"2"),)


async def _nothing(*_: Any) -> Any:
    raise AssertionError("not called")


def _fast(state: ServerState | None = None, limit: int = 2) -> FastPath:
    if state is None:
        state = ServerState()
        state.move(Phase.LOADING)
        state.move(Phase.READY)
    gate = Gate(_nothing, state, limit)
    return FastPath(gate, dict.fromkeys(PATHS, _nothing), TAGS)


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
