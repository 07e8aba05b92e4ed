"""The front's ASGI stack in one process: app, sticky sessions, replica scope, gate, uvicorn's config.

Why one builder: the supervisor's own process builds it when it is the only front process
(NEURONSERVE_FRONT_WORKERS resolved to 1), and every front worker builds the same stack around its
views of the shared state (front/statemirror.py, front/fleetview.py, front/limiter.py). The routes,
the guards and their order are one code path either way.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import uvicorn

from neuronserve.config.table import VARS
from neuronserve.front.app import create_app
from neuronserve.front.gate import Gate, Message, Receive, Scope, Send
from neuronserve.front.limiter import Limiter
from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.proxy import pool_size
from neuronserve.front.replica_metrics import ReplicaCounts
from neuronserve.front.router import Fleet, ReplicaScope, Router
from neuronserve.front.sessions import SessionScope, SessionStore
from neuronserve.front.state import ServerState
from neuronserve.serve import listener
from neuronserve.serve.connections import ConnectionLimits
from neuronserve.serve.watchdog import LoopWatchdog
from neuronserve.types import RequestSupport, ServeOptions

log = logging.getLogger("neuronserve.serve")
WORKER_HEADER = b"x-neuronserve-worker"


@dataclass(frozen=True)
class FrontConfig:
    """What a front process needs besides the shared state: picklable, handed to each worker."""

    opts: ServeOptions
    support: RequestSupport
    limits: ConnectionLimits
    body_timeout_s: float
    loop_stall_s: float
    stage_stall_s: float


def front_config(opts: ServeOptions, support: RequestSupport, environ: Mapping[str, str]) -> FrontConfig:
    """From the settings' rows; the connection bound fitted to the open-file limit (raised here, so the
    workers inherit the raised limit)."""
    limits = listener.fit_to_files(listener.connection_limits(environ), listener.raise_file_limit())
    return FrontConfig(
        opts,
        support,
        limits,
        listener.body_timeout_s(environ),
        VARS["NEURONSERVE_LIVE_LOOP_STALL_S"].read(environ),
        VARS["NEURONSERVE_LIVE_STAGE_STALL_S"].read(environ),
    )


@dataclass
class FrontStack:
    gate: Gate
    client: Router
    watchdog: LoopWatchdog
    config: uvicorn.Config


def build_front(
    cfg: FrontConfig,
    state: ServerState,
    *,
    fleet: Fleet,
    limiter: Limiter,
    metrics: FrontMetrics,
    store: SessionStore | None,
    counts: Callable[[], list[ReplicaCounts]] | None = None,
    worker: int | None = None,
) -> FrontStack:
    opts = cfg.opts
    connections = pool_size(opts.max_concurrency, opts.engine_connections)
    first = (worker or 0) % len(fleet.replicas)
    client = Router(fleet, opts.request_timeout_s, connections, counts, first)
    hot = create_app(state, opts, client, metrics=metrics, support=cfg.support)
    app: Any = hot
    payload = int(opts.max_payload_mb * 1024 * 1024)
    if store is not None:
        app = SessionScope(app, store, client, fleet, payload)
    watchdog = LoopWatchdog(cfg.loop_stall_s)
    state.loop_verdict = watchdog.verdict
    state.stage_stall_s = cfg.stage_stall_s
    gate = Gate(
        ReplicaScope(app),
        state,
        opts.max_concurrency,
        metrics=metrics,
        expose_engine_routes=opts.expose_engine_routes,
        body_timeout_s=cfg.body_timeout_s,
        max_body_bytes=payload,
        limiter=limiter,
    )
    served: Any = gate if worker is None else WorkerTag(gate, worker)
    config = listener.uvicorn_config(served, opts, cfg.limits)
    return FrontStack(gate, client, watchdog, config)


def worker_header(worker: int) -> tuple[bytes, bytes]:
    """`X-Neuronserve-Worker: N`, as every answer of a front worker carries it (WorkerTag)."""
    return (WORKER_HEADER, str(worker).encode())


class WorkerTag:
    """With several front processes, every answer names the one that gave it (`X-Neuronserve-Worker`):
    for an operator chasing one misbehaving process, and for the tests that must see both answer."""

    def __init__(self, app: Any, worker: int) -> None:
        self.app = app
        self.header = worker_header(worker)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), self.header]}
            await send(message)

        await self.app(scope, receive, tagged)


class QuietServer(uvicorn.Server):
    """uvicorn without its own signal handling: the supervisor owns SIGTERM (a drain) for every front
    process (a worker stops when the supervisor says so, serve/worker.py)."""

    def install_signal_handlers(self) -> None:
        return None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
