"""The serve lifecycle on one event loop: front up first, then stage -> engine -> READY -> publish.

The supervisor owns every phase change. It polls the engine process (a non-blocking waitpid every
100 ms), so an engine death turns /ping 503 at once and ends the server non-zero with the engine's last
lines; a background task refreshes the cached engine health so /ping never waits on the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import uvicorn

from neuronserve import __version__, logsetup, stage
from neuronserve.config.table import VARS
from neuronserve.engine import health as engine_health
from neuronserve.engine.pool import Fatal, ReplicaPool
from neuronserve.errors import NeuronServeError
from neuronserve.front.app import create_app
from neuronserve.front.gate import Gate
from neuronserve.front.metrics import FrontMetrics, build_labels
from neuronserve.front.proxy import pool_size
from neuronserve.front.router import ReplicaScope, Router
from neuronserve.front.sessions import SessionScope, SessionStore
from neuronserve.front.state import Phase, ServerState
from neuronserve.front.version import running_stack
from neuronserve.host.versions import installed_versions
from neuronserve.serve import listener
from neuronserve.serve.threads import in_daemon_thread
from neuronserve.serve.watchdog import LoopWatchdog
from neuronserve.stage import events
from neuronserve.types import LaunchPlan, Progress, StageResult

log = logging.getLogger("neuronserve.serve")
POLL_S = 0.1
HEALTH_TIMEOUT_S = 2.0
# The supervisor polls every POLL_S and awaits the engine at most a few seconds (HEALTH_TIMEOUT_S per
# call): this long without a poll, it is wedged (/live's engine check). A compile never counts: the
# supervisor polls all through it.
SUPERVISOR_STALL_S = 30.0


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: SIGTERM means drain, which the supervisor does."""

    def install_signal_handlers(self) -> None:
        return None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Supervisor:
    def __init__(
        self,
        plan: LaunchPlan,
        environ: Mapping[str, str],
        state: ServerState,
        gate: Gate,
        pool: ReplicaPool | None = None,
        *,
        metrics: FrontMetrics | None = None,
    ) -> None:
        self.plan = plan
        self.environ = environ
        self.state = state
        self.gate = gate
        self.metrics = metrics
        self.pool = pool or ReplicaPool(plan, environ)
        if metrics is not None:
            self.pool.on_start = lambda _index: metrics.engine_starts.inc()
        self.stop_requested = asyncio.Event()
        self._stage_result: StageResult | None = None
        self._publishing: asyncio.Future[None] | None = None
        self._beat = time.monotonic()  # the supervisor's last poll
        self._health: asyncio.Task[None] | None = None

    def verdict(self) -> str | None:
        """/live's engine check: the supervisor polls, its health watcher runs, and an engine runs or is
        due a restart. None while draining (the engines stop on purpose) and once FAILED (the state says)."""
        phase = self.state.phase
        if phase in (Phase.DRAINING, Phase.FAILED):
            return None
        quiet = time.monotonic() - self._beat
        if quiet > SUPERVISOR_STALL_S:
            return f"the engine supervisor has not polled for {quiet:.0f} s"
        health = self._health
        if health is not None and health.done():
            why = "cancelled" if health.cancelled() else repr(health.exception())
            return f"the engines' health watcher stopped ({why}): nothing would mark them READY or unhealthy"
        return self.pool.stuck() if phase in (Phase.LOADING, Phase.READY) else None

    def request_stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if not self.stop_requested.is_set():
            log.info("stop requested (%s): draining", "Ctrl-C" if sig == signal.SIGINT else sig.name)
            self.stop_requested.set()
            # At once, not at the next poll: /ping and new requests must see DRAINING immediately.
            if self.state.phase in (Phase.STAGING, Phase.LOADING, Phase.READY):
                self.state.move(Phase.DRAINING, f"{self.gate.in_flight} request(s) in flight")

    def _progress(self, progress: Progress) -> None:
        self.state.set_progress(progress)
        if self.metrics is not None:
            self.metrics.stage_progress(progress.what, progress.done_bytes)

    async def run(self, server_task: asyncio.Task[Any]) -> int:
        unsubscribe = events.subscribe(self.metrics.cache_event) if self.metrics else (lambda: None)
        try:
            return await self._run(server_task)
        finally:
            unsubscribe()
            # also after a death: its workers may survive it
            await asyncio.to_thread(self.pool.stop_all)

    def _compile_first(self) -> bool:
        """Neuron cache miss with several replicas: replica 0 compiles, the others load its artifacts."""
        result = self._stage_result
        return (
            self.plan.device == "neuron"
            and len(self.pool) > 1
            and result is not None
            and result.cache == "miss"
        )

    async def _run(self, server_task: asyncio.Task[Any]) -> int:
        """The phases of one start: stage, start the engines, supervise them until the end."""
        ended = await self._stage(server_task)
        if ended is not None:
            return ended
        try:
            self.pool.start_initial(self._compile_first())
        except NeuronServeError as err:
            return self._fail(str(err))
        self.state.engine_alive = self.pool.enough_ready if len(self.pool) > 1 else self._alive
        self.state.replicas = self.pool.describe if len(self.pool) > 1 else self.state.replicas
        self.state.move(Phase.LOADING, self.pool.pids())
        return await self._supervise(server_task)

    async def _stage(self, server_task: asyncio.Task[Any]) -> int | None:
        """Stage the model and artifacts; the exit code when the start ends here, else None."""
        staging = in_daemon_thread(stage.stage_all, self.plan, self.environ, self._progress)
        while not staging.done():
            self._beat = time.monotonic()
            if server_task.done():
                return self._front_died(server_task)
            if self.stop_requested.is_set():
                # Nothing is served yet, so nothing is lost: staging stops with the process (its
                # thread is a daemon, its s5cmd child dies with us), and the next start resumes the
                # copy from its journal instead of starting over.
                log.info("stopped while staging: the partial copy is kept and resumed by the next start")
                return 0
            await asyncio.sleep(POLL_S)
        try:
            self._stage_result = staging.result()
        except NeuronServeError as err:
            return self._fail(f"staging failed: {err}")
        except Exception as err:
            return self._fail(f"staging failed unexpectedly: {type(err).__name__}: {err}")
        if self.metrics is not None and self._stage_result.cache in ("hit", "miss"):
            self.metrics.cache_event(self._stage_result.cache)
        return None

    async def _supervise(self, server_task: asyncio.Task[Any]) -> int:
        """Poll the engines, the front and the stop request until one ends the start; READY on the way."""
        health = self._health = asyncio.create_task(engine_health.watch(self.pool))
        started = time.monotonic()
        timeout = self.plan.serve.startup_timeout_s
        try:
            while True:
                self._beat = time.monotonic()
                if self.stop_requested.is_set():
                    return await self._drain()
                fatal = self.pool.poll()
                if fatal is not None:
                    return self._engine_died(fatal)
                if server_task.done():
                    return self._front_died(server_task)
                await self._advance()
                if timeout and self.state.phase == Phase.LOADING and time.monotonic() - started > timeout:
                    return self._fail(
                        f"the engine was not ready after {timeout:.0f} s (SAGEMAKER_STARTUP_TIMEOUT)"
                    )
                await asyncio.sleep(POLL_S)
        finally:
            health.cancel()

    def _alive(self) -> bool:
        return any(r.proc is not None and r.proc.returncode() is None for r in self.pool.replicas)

    async def _advance(self) -> None:
        """Publish after replica 0's first READY; start the waiting replicas once that is done; READY."""
        first = self.pool.replicas[0]
        if self._publishing is None and first.ever_ready and self._stage_result is not None:
            self._publishing = asyncio.ensure_future(asyncio.to_thread(self._publish, self._stage_result))
        if (
            self.pool.waiting()
            and first.serving()
            and self._publishing is not None
            and self._publishing.done()
        ):
            log.info("replica 0's artifacts are complete: starting the other replicas, which load them")
            try:
                self.pool.start_waiting()
            except NeuronServeError as err:
                log.warning("%s", err)
        if self.state.phase == Phase.LOADING and self.pool.enough_ready():
            await self._became_ready()
        elif self.state.phase == Phase.READY:
            self.state.set_engine_health(any(r.healthy for r in self.pool.replicas))

    async def _became_ready(self) -> None:
        url = next(r.base_url for r in self.pool.replicas if r.serving())
        try:
            async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S) as client:
                models = (await client.get(f"{url}/v1/models")).json()
            self.state.model_name = models["data"][0]["id"]
            self.state.model_names = [str(m["id"]) for m in models["data"]]
            self.state.max_model_len = models["data"][0].get("max_model_len")
        except (httpx.HTTPError, ValueError, KeyError, IndexError) as err:
            log.warning("could not read the engine's model name from /v1/models: %s", err)
        self.state.set_engine_health(True)
        self.pool.server_ready = True
        self.state.move(Phase.READY, f"model {self.state.model_name}")

    def _publish(self, result: StageResult) -> None:
        try:
            stage.publish_artifacts(self.plan, result, self.environ)
        except Exception as err:  # publishing is best effort: serving goes on
            events.emit("publish_failed")
            log.warning("publishing compiled artifacts failed: %s", err)

    async def _drain(self) -> int:
        grace = self.plan.serve.drain_grace_s
        log.info("draining %d request(s), grace %.0f s", self.gate.in_flight, grace)
        try:
            await asyncio.wait_for(self.gate.idle.wait(), timeout=grace)
            log.info("drained: no request in flight")
        except TimeoutError:
            log.warning("grace period over with %d request(s) still in flight", self.gate.in_flight)
        codes = await asyncio.to_thread(self.pool.stop_all)
        log.info("engine(s) stopped (exit %s)", ", ".join(str(c) for c in codes))
        return 0

    def _engine_died(self, fatal: Fatal) -> int:
        self.state.move(Phase.FAILED, fatal.message)
        logsetup.fatal(f"{fatal.message}; its last lines:", fatal.lines)
        return 1

    def _front_died(self, server_task: asyncio.Task[Any]) -> int:
        err = None if server_task.cancelled() else server_task.exception()
        return self._fail(
            f"the front server stopped ({err or 'no error'}); is port {self.plan.serve.port} free?"
        )

    def _fail(self, message: str) -> int:
        if self.state.phase != Phase.FAILED:
            self.state.move(Phase.FAILED, message)
        logsetup.fatal(message)
        return 1


async def serve(plan: LaunchPlan, environ: Mapping[str, str], sock: socket.socket | None = None) -> int:
    """Run until SIGTERM (exit 0 after draining) or a failure (non-zero)."""
    opts = plan.serve
    state = ServerState()
    state.device = plan.device
    installed = installed_versions()
    state.stack = running_stack(plan.stack, installed, plan.device)  # what runs, not only the lane's pins
    if "--dtype" in plan.argv[:-1]:
        state.model_dtype = plan.argv[plan.argv.index("--dtype") + 1]
    pool = ReplicaPool(plan, environ)
    client = Router(pool, opts.request_timeout_s, pool_size(opts.max_concurrency, opts.engine_connections))
    sdk = VARS["NEURON_SDK_VERSION"].read(environ)
    build = build_labels(installed, __version__, sdk, state.stack["lane"])
    metrics = FrontMetrics(state, lambda: gate.in_flight, build)
    app: Any = create_app(state, opts, client, metrics=metrics, support=plan.request_support)
    if opts.sticky_sessions:
        store = SessionStore(opts.session_ttl_s, max_sessions=opts.max_sessions)
        pool.on_replaced = store.close_replica
        app = SessionScope(app, store, client, pool, int(opts.max_payload_mb * 1024 * 1024))
    limits = listener.fit_to_files(listener.connection_limits(environ), listener.raise_file_limit())
    watchdog = LoopWatchdog(VARS["NEURONSERVE_LIVE_LOOP_STALL_S"].read(environ))
    state.loop_verdict = watchdog.verdict
    state.stage_stall_s = VARS["NEURONSERVE_LIVE_STAGE_STALL_S"].read(environ)
    gate = Gate(
        ReplicaScope(app),
        state,
        opts.max_concurrency,
        metrics=metrics,
        expose_engine_routes=opts.expose_engine_routes,
        body_timeout_s=listener.body_timeout_s(environ),
        max_body_bytes=int(opts.max_payload_mb * 1024 * 1024),
    )
    if opts.expose_engine_routes:
        log.warning(
            "NEURONSERVE_EXPOSE_ENGINE_ROUTES=true: every engine route is reachable on port %d, "
            "including admin routes (/scale_elastic_ep, /collective_rpc, /sleep, LoRA loading, /docs)",
            opts.port,
        )
    config = listener.uvicorn_config(gate, opts, limits)
    server = _Server(config)
    supervisor = Supervisor(plan, environ, state, gate, pool, metrics=metrics)
    state.supervisor_verdict = supervisor.verdict
    loop = asyncio.get_running_loop()
    watchdog.start(loop)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, supervisor.request_stop, sig)
    server_task = asyncio.create_task(server.serve(sockets=[sock] if sock else None))
    try:
        code = await supervisor.run(server_task)
    finally:
        server.should_exit = True
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(server_task, timeout=5.0)
        await client.aclose()
        watchdog.stop()
    log.info("exit %d", code)
    return code
