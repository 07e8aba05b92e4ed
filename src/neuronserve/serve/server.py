"""`serve`: the front and its supervisor wired together, with one front process or several.

One front process (NEURONSERVE_FRONT_WORKERS resolved to 1: `auto` with one replica, serve/workers.py):
uvicorn serves the front in the supervisor's own process and event loop; nothing of the workers'
machinery exists.
Several: the workers are already starting (commands/serve.py starts them right after binding the
port, before this module's imports) and serve the front over the board; this process supervises,
writing its state to the board at every poll and phase move.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Mapping

from neuronserve import __version__
from neuronserve.config.table import VARS
from neuronserve.engine.pool import ReplicaPool
from neuronserve.front.fleetview import RPHASES
from neuronserve.front.limiter import Limiter, SharedLimiter
from neuronserve.front.metrics import FrontMetrics, build_labels
from neuronserve.front.sessions import SessionStore
from neuronserve.front.state import ServerState
from neuronserve.front.statemirror import publish
from neuronserve.front.version import running_stack
from neuronserve.host.versions import installed_versions
from neuronserve.serve import listener
from neuronserve.serve.frontstack import QuietServer, build_front, front_config
from neuronserve.serve.lifecycle import OneServer, Supervisor
from neuronserve.serve.workers import Workers
from neuronserve.types import LaunchPlan

log = logging.getLogger("neuronserve.serve")


def _state(plan: LaunchPlan) -> tuple[ServerState, dict[str, str | None]]:
    state = ServerState()
    state.device = plan.device
    installed = installed_versions()
    state.stack = running_stack(plan.stack, installed, plan.device)  # what runs, not only the lane's pins
    if "--dtype" in plan.argv[:-1]:
        state.model_dtype = plan.argv[plan.argv.index("--dtype") + 1]
    return state, installed


def _warn_exposed(plan: LaunchPlan) -> None:
    if plan.serve.expose_engine_routes:
        log.warning(
            "NEURONSERVE_EXPOSE_ENGINE_ROUTES=true: every engine route is reachable on port %d, "
            "including admin routes (/scale_elastic_ep, /collective_rpc, /sleep, LoRA loading, /docs)",
            plan.serve.port,
        )


def _on_signals(supervisor: Supervisor) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, supervisor.request_stop, sig)


async def serve(
    plan: LaunchPlan,
    environ: Mapping[str, str],
    sock: socket.socket | None = None,
    workers: Workers | None = None,
) -> int:
    """Run until SIGTERM (exit 0 after draining) or a failure (non-zero)."""
    if workers is not None:
        return await _with_workers(plan, environ, workers)
    opts = plan.serve
    state, installed = _state(plan)
    pool = ReplicaPool(plan, environ)
    sdk = VARS["NEURON_SDK_VERSION"].read(environ)
    limiter = Limiter(opts.max_concurrency)
    metrics = FrontMetrics(
        state, lambda: limiter.in_flight, build_labels(installed, __version__, sdk, state.stack["lane"])
    )
    store = None
    if opts.sticky_sessions:
        store = SessionStore(opts.session_ttl_s, max_sessions=opts.max_sessions)
        pool.on_replaced = store.close_replica
    config = front_config(opts, plan.request_support, environ)
    stack = build_front(config, state, fleet=pool, limiter=limiter, metrics=metrics, store=store)
    _warn_exposed(plan)
    server = QuietServer(stack.config)
    supervisor = Supervisor(plan, environ, state, limiter, pool, metrics=metrics)
    state.supervisor_verdict = supervisor.verdict
    stack.watchdog.start(asyncio.get_running_loop())
    _on_signals(supervisor)
    server_task = asyncio.create_task(server.serve(sockets=[sock] if sock else None))
    try:
        code = await supervisor.run(OneServer(server_task, opts.port))
    finally:
        server.should_exit = True
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(server_task, timeout=5.0)
        await stack.client.aclose()
        stack.watchdog.stop()
    log.info("exit %d", code)
    return code


async def _with_workers(plan: LaunchPlan, environ: Mapping[str, str], workers: Workers) -> int:
    """The supervisor of front workers: no HTTP here; its state goes to the board."""
    opts, board = plan.serve, workers.board
    listener.raise_file_limit()  # for the engines it starts, as with one front process
    state, installed = _state(plan)
    pool = ReplicaPool(plan, environ)
    limiter = SharedLimiter(board, None, opts.max_concurrency)
    sdk = VARS["NEURON_SDK_VERSION"].read(environ)
    build = build_labels(installed, __version__, sdk, state.stack["lane"])
    metrics = FrontMetrics(state, lambda: limiter.in_flight, build, workers.metrics_dir)
    workers.on_restart = metrics.worker_restarted
    if opts.sticky_sessions:
        ledger, lock = board.ledger, board.ledger_lock
        store = SessionStore(
            opts.session_ttl_s, max_sessions=workers.sessions, ledger=ledger, lock=lock, generations=board
        )
        pool.on_replaced = store.close_replica
    _warn_exposed(plan)
    supervisor = Supervisor(plan, environ, state, limiter, pool, metrics=metrics)
    state.supervisor_verdict = supervisor.verdict

    def tick() -> None:
        publish(board, state, supervisor.verdict())
        for r in pool.replicas:
            alive = r.proc is not None and r.proc.returncode() is None
            board.set_replica(r.index, RPHASES.index(r.phase), r.healthy, alive, r.restarts)

    supervisor.on_tick = tick
    state.on_change(tick)
    tick()
    _on_signals(supervisor)
    try:
        code = await supervisor.run(workers)
    finally:
        await asyncio.to_thread(workers.stop)
        workers.close()
    log.info("exit %d", code)
    return code
