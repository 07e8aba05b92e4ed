"""The front's stack as one process builds it: the limiter and fleet it is given are the ones the gate
and the router use, and a worker's answers (every one, refusals included) name it."""

from __future__ import annotations

import asyncio

import httpx
from tests.support.replicas import make_plan

from neuronserve.engine.pool import ReplicaPool
from neuronserve.front.limiter import Limiter
from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.sessions import SessionScope, SessionStore
from neuronserve.front.state import Phase, ServerState
from neuronserve.serve.frontstack import build_front, front_config
from neuronserve.types import RequestSupport


def _stack(tmp: str, worker: int | None, sessions: bool = False) -> tuple[object, ServerState, Limiter]:
    plan = make_plan(2, tmp)
    state = ServerState()
    limiter = Limiter(1)
    metrics = FrontMetrics(state, lambda: limiter.in_flight, {})
    store = SessionStore(60.0) if sessions else None
    config = front_config(plan.serve, RequestSupport(), {})
    stack = build_front(
        config,
        state,
        fleet=ReplicaPool(plan, {}),
        limiter=limiter,
        metrics=metrics,
        store=store,
        worker=worker,
    )
    assert stack.gate.limiter is limiter and stack.gate.state is state
    assert stack.client.fleet.replicas[1].index == 1
    assert state.loop_verdict == stack.watchdog.verdict
    return stack, state, limiter


def _get(app: object, path: str) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://front") as client:
            return await client.get(path)

    return asyncio.run(go())


def test_a_workers_answers_name_it(tmp_path: object) -> None:
    stack, state, limiter = _stack(str(tmp_path), worker=3)
    app = stack.config.app  # type: ignore[attr-defined]
    assert _get(app, "/ping").headers["x-neuronserve-worker"] == "3"  # 503 STAGING
    refused = _get(app, "/v1/models")  # refused by the gate itself (not READY)
    assert refused.status_code == 503 and refused.headers["x-neuronserve-worker"] == "3"
    state.move(Phase.LOADING)
    state.move(Phase.READY)
    state.set_engine_health(True)
    assert limiter.try_acquire(1)  # the one slot taken: the gate refuses with this limiter's count
    over = _get(app, "/v1/models")
    assert over.status_code == 429 and over.headers["x-neuronserve-worker"] == "3"


def test_one_process_adds_nothing(tmp_path: object) -> None:
    stack, _, _ = _stack(str(tmp_path), worker=None, sessions=True)
    assert stack.config.app is stack.gate  # type: ignore[attr-defined]
    assert isinstance(stack.gate.app.app, SessionScope)  # type: ignore[attr-defined]
    assert "x-neuronserve-worker" not in _get(stack.gate, "/ping").headers
