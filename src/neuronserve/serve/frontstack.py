"""The front's ASGI stack in one process: app, sticky sessions, replica scope, gate, uvicorn's config.

Why one builder: the supervisor's own process builds it when it is the only front process
(NEURONSERVE_FRONT_WORKERS=1, the default), and every front worker builds the same stack around its
views of the shared state (front/statemirror.py, front/fleetview.py, front/limiter.py). The routes,
the guards and their order are one code path either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
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
from neuronserve.serve import gilheld, listener
from neuronserve.serve.connections import ConnectionLimits
from neuronserve.serve.doorprocess import ProcessDoor
from neuronserve.serve.fastpath import FastPath
from neuronserve.serve.probedoor import DoorLoop, ProbeDoor
from neuronserve.serve.watchdog import LoopWatchdog
from neuronserve.types import RequestSupport, ServeOptions

log = logging.getLogger("neuronserve.serve")
Door = ProbeDoor | ProcessDoor
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
    probe_thread: bool
    probe_door: str = "process"  # NEURONSERVE_PROBE_DOOR: where the door runs when probe_thread is on
    fast_path: bool = True  # NEURONSERVE_FAST_PATH: plain generate requests below uvicorn's cycle


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
        VARS["NEURONSERVE_PROBE_THREAD"].read(environ),
        VARS["NEURONSERVE_PROBE_DOOR"].read(environ),
        VARS["NEURONSERVE_FAST_PATH"].read(environ),
    )


@dataclass
class FrontStack:
    gate: Gate
    client: Router
    watchdog: LoopWatchdog
    config: uvicorn.Config
    door: Door | None  # None: NEURONSERVE_PROBE_THREAD=false, the loop answers the probes


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
    tags = () if worker is None else (worker_header(worker),)
    door: Door | None = None
    if cfg.probe_thread and gilheld.AVAILABLE:
        kind = ProcessDoor if cfg.probe_door == "process" else ProbeDoor
        door = kind(state, cfg.limits, listener.KEEP_ALIVE_S, tags)
    elif cfg.probe_thread:
        log.warning("no probe door (this Python has no ctypes or no accept4): the event loop answers /ping")
    # The fast path serves the hot routes' handlers itself; a session store wraps them (SessionScope),
    # so with sessions every request takes the usual path.
    fast = FastPath(gate, hot.hot, tags) if cfg.fast_path and store is None else None
    config = listener.uvicorn_config(served, opts, cfg.limits, door.held if door else None, fast)
    return FrontStack(gate, client, watchdog, config, door)


def worker_header(worker: int) -> tuple[bytes, bytes]:
    """`X-Neuronserve-Worker: N`, as the routes' answers (WorkerTag) and the door's probes carry it."""
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
    process (a worker stops when the supervisor says so, serve/worker.py). Given a probe door, the
    door accepts on the listening socket and hands uvicorn every connection that is not a probe
    (serve/probedoor.py)."""

    def __init__(self, config: uvicorn.Config, door: Door | None = None) -> None:
        super().__init__(config)
        self.door = door

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if self.door is None or not sockets:
            await super().startup(sockets=sockets)
            return
        (sock,) = sockets
        await super().startup(sockets=[])  # uvicorn accepts nothing itself
        await self.on_tick(0)  # its date and server headers now, not at its main loop's first tick
        state = self.server_state
        protocol: Any = self.config.http_protocol_class
        factory = functools.partial(
            protocol,
            config=self.config,
            server_state=state,
            app_state=self.lifespan.state,
        )
        loop = asyncio.get_running_loop()
        self.door.start(
            sock, DoorLoop(loop, factory, lambda: len(state.connections), lambda: state.default_headers)
        )

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.door is not None:
            self.door.stop()  # accepts no more, closes what it holds and the listening socket
        await super().shutdown(sockets=sockets)

    def install_signal_handlers(self) -> None:
        return None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
