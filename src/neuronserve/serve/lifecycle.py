"""The serve lifecycle on one event loop: front up first, then stage -> engine -> READY -> publish.

The supervisor owns every phase change (serve/server.py starts it with its front: uvicorn in this
process, or the front workers, serve/workers.py). It polls the engine process (a non-blocking waitpid every
100 ms), so an engine death turns /ping 503 at once and ends the server non-zero with the engine's last
lines; a background task refreshes the cached engine health so /ping never waits on the engine.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import httpx

from neuronserve import logsetup, stage
from neuronserve.engine import health as engine_health
from neuronserve.engine.pool import Fatal, ReplicaPool
from neuronserve.errors import NeuronServeError
from neuronserve.front.limiter import Limiter
from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.state import Phase, ServerState
from neuronserve.front.statemirror import SUPERVISOR_STALL_S
from neuronserve.serve.threads import in_daemon_thread
from neuronserve.stage import events
from neuronserve.types import LaunchPlan, Progress, StageResult

log = logging.getLogger("neuronserve.serve")
POLL_S = 0.1
HEALTH_TIMEOUT_S = 2.0
# SUPERVISOR_STALL_S: the supervisor polls every POLL_S and awaits the engine at most a few seconds
# (HEALTH_TIMEOUT_S per call): this long without a poll, it is wedged (/live's engine check). A compile
# never counts: the supervisor polls all through it. (Defined with the workers' mirror, which reads it.)


class Front(Protocol):
    """The front the supervisor watches: its one uvicorn server, or its worker processes."""

    def failure(self) -> str | None: ...


class OneServer:
    """The front in the supervisor's own process (one front process): uvicorn's task."""

    def __init__(self, task: asyncio.Task[Any], port: int) -> None:
        self.task, self.port = task, port

    def failure(self) -> str | None:
        if not self.task.done():
            return None
        err = None if self.task.cancelled() else self.task.exception()
        return f"the front server stopped ({err or 'no error'}); is port {self.port} free?"


class Supervisor:
    def __init__(
        self,
        plan: LaunchPlan,
        environ: Mapping[str, str],
        state: ServerState,
        limiter: Limiter,
        pool: ReplicaPool | None = None,
        *,
        metrics: FrontMetrics | None = None,
    ) -> None:
        self.plan = plan
        self.environ = environ
        self.state = state
        self.limiter = limiter  # the front's count of sequences in flight (the drain waits for 0)
        self.metrics = metrics
        self.on_tick: Callable[[], object] = lambda: None  # each poll (the workers' board is written)
        self.pool = pool or ReplicaPool(plan, environ)
        if metrics is not None:
            self.pool.on_start = lambda _index: metrics.engine_starts.inc()
        self.stop_requested = asyncio.Event()
        self._stage_result: StageResult | None = None
        self._publishing: asyncio.Future[None] | None = None
        self._beat = time.monotonic()  # the supervisor's last poll
        self._health: asyncio.Task[None] | None = None
        self._front: Front | None = None

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
                self.state.move(Phase.DRAINING, f"{self.limiter.in_flight} request(s) in flight")

    def _progress(self, progress: Progress) -> None:
        self.state.set_progress(progress)
        if self.metrics is not None:
            self.metrics.stage_progress(progress.what, progress.done_bytes)

    def _tick(self) -> None:
        self._beat = time.monotonic()
        self.on_tick()

    async def run(self, front: Front) -> int:
        self._front = front
        unsubscribe = events.subscribe(self.metrics.cache_event) if self.metrics else (lambda: None)
        try:
            return await self._run(front)
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

    async def _run(self, front: Front) -> int:
        """The phases of one start: stage, start the engines, supervise them until the end."""
        ended = await self._stage(front)
        if ended is not None:
            return ended
        try:
            self.pool.start_initial(self._compile_first())
        except NeuronServeError as err:
            return self._fail(str(err))
        self.state.engine_alive = self.pool.enough_ready if len(self.pool) > 1 else self._alive
        self.state.replicas = self.pool.describe if len(self.pool) > 1 else self.state.replicas
        self.state.move(Phase.LOADING, self.pool.pids())
        return await self._supervise(front)

    async def _stage(self, front: Front) -> int | None:
        """Stage the model and artifacts; the exit code when the start ends here, else None."""
        staging = in_daemon_thread(stage.stage_all, self.plan, self.environ, self._progress)
        while not staging.done():
            self._tick()
            failure = front.failure()
            if failure is not None:
                return self._fail(failure)
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

    async def _supervise(self, front: Front) -> int:
        """Poll the engines, the front and the stop request until one ends the start; READY on the way."""
        health = self._health = asyncio.create_task(engine_health.watch(self.pool))
        started = time.monotonic()
        timeout = self.plan.serve.startup_timeout_s
        try:
            while True:
                self._tick()
                if self.stop_requested.is_set():
                    return await self._drain()
                fatal = self.pool.poll()
                if fatal is not None:
                    return self._engine_died(fatal)
                failure = front.failure()
                if failure is not None:
                    return self._fail(failure)
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
        log.info("draining %d request(s), grace %.0f s", self.limiter.in_flight, grace)
        idle = asyncio.ensure_future(self.limiter.wait_idle())
        deadline = time.monotonic() + grace
        while not idle.done() and time.monotonic() < deadline:
            self._tick()  # the workers' board keeps its heartbeat through a long drain
            if self._front is not None:
                self._front.failure()  # a worker that dies now: its requests leave the count
            await asyncio.wait({idle}, timeout=min(POLL_S, max(0.0, deadline - time.monotonic())))
        if idle.done():
            log.info("drained: no request in flight")
        else:
            idle.cancel()
            log.warning("grace period over with %d request(s) still in flight", self.limiter.in_flight)
        codes = await asyncio.to_thread(self.pool.stop_all)
        log.info("engine(s) stopped (exit %s)", ", ".join(str(c) for c in codes))
        return 0

    def _engine_died(self, fatal: Fatal) -> int:
        self.state.move(Phase.FAILED, fatal.message)
        logsetup.fatal(f"{fatal.message}; its last lines:", fatal.lines)
        return 1

    def _fail(self, message: str) -> int:
        if self.state.phase != Phase.FAILED:
            self.state.move(Phase.FAILED, message)
        logsetup.fatal(message)
        return 1
