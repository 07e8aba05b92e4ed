"""One front worker process (`python -m neuronserve.serve.worker`, started by serve/workers.py).

It reads its WorkerConfig from stdin, serves the whole route table on the listening socket it inherited,
over the shared state on the board it inherited, and exits when stdin closes (the supervisor's word to
stop, or its death). Its event loop stamps its heartbeat on the board every BEAT_S: the supervisor
replaces a worker whose heartbeat stops (serve/workers.py). SIGTERM and SIGINT are the supervisor's:
ignored here, so a signal sent to the whole process group still drains through the supervisor.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import signal
import socket
import sys
import time

from neuronserve import __version__, logsetup
from neuronserve.config.table import VARS
from neuronserve.front import requestid
from neuronserve.front.board import Board
from neuronserve.front.fleetview import FleetView
from neuronserve.front.limiter import SharedLimiter
from neuronserve.front.metrics import FrontMetrics, build_labels
from neuronserve.front.sessions import SessionStore
from neuronserve.front.statemirror import MirroredState
from neuronserve.front.version import running_stack
from neuronserve.host.versions import installed_versions
from neuronserve.serve import eventloop
from neuronserve.serve.frontstack import QuietServer, build_front, front_config
from neuronserve.serve.workers import BEAT_S, WorkerConfig

log = logging.getLogger("neuronserve.serve")


async def serve_worker(cfg: WorkerConfig, environ: dict[str, str]) -> int:
    requestid.number_engine_calls_from((cfg.index + 1) << 40)
    board = Board.attach(cfg.board_fd, cfg.workers, len(cfg.base_urls), cfg.sessions)
    opts = cfg.opts
    state = MirroredState(board)
    installed = installed_versions()
    state.device, state.model_dtype = cfg.device, cfg.model_dtype
    state.stack = running_stack(cfg.stack, installed, cfg.device)
    fleet = FleetView(board, cfg.index, list(cfg.base_urls))
    limiter = SharedLimiter(board, cfg.index, opts.max_concurrency)
    sdk = VARS["NEURON_SDK_VERSION"].read(environ)
    build = build_labels(installed, __version__, sdk, state.stack["lane"])
    metrics = FrontMetrics(state, lambda: limiter.in_flight, build, cfg.metrics_dir)
    store = None
    if opts.sticky_sessions:
        lock, ledger = board.ledger_lock, board.ledger
        store = SessionStore(
            opts.session_ttl_s, max_sessions=cfg.sessions, ledger=ledger, lock=lock, generations=board
        )
    config = front_config(opts, cfg.support, environ)
    stack = build_front(
        config,
        state,
        fleet=fleet,
        limiter=limiter,
        metrics=metrics,
        store=store,
        counts=fleet.counts,
        worker=cfg.index,
    )
    server = QuietServer(stack.config)
    loop = asyncio.get_running_loop()
    stack.watchdog.start(loop)

    def beat() -> None:  # on the loop itself: a loop that stops running stops beating
        board.set_worker_beat(cfg.index, time.monotonic())
        loop.call_later(BEAT_S, beat)

    beat()

    def stdin_readable() -> None:
        if not os.read(0, 4096):  # the supervisor closed it (or died): stop serving
            loop.remove_reader(0)
            server.should_exit = True

    loop.add_reader(0, stdin_readable)
    sock = socket.socket(fileno=cfg.sock_fd)
    try:
        await server.serve(sockets=[sock])
    finally:
        await stack.client.aclose()
        stack.watchdog.stop()
    return 0


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    cfg: WorkerConfig = pickle.load(sys.stdin.buffer)  # noqa: S301 (our own supervisor, over a pipe)
    logsetup.setup(cfg.log_format)
    environ = dict(os.environ)
    return eventloop.run(serve_worker(cfg, environ))


if __name__ == "__main__":
    sys.exit(main())
