"""The data-parallel engine replicas: start them (compile once), watch them, restart the dead ones.

Why restart instead of exiting: with several replicas one engine death should cost capacity, not the
endpoint. A replica that dies after the server was READY is restarted on the same cores after a backoff
(1 s, doubling, at most 30 s) while the others serve; the server gives up (exit non-zero) when no
replica can serve. A replica that dies before it was ever READY is not restarted: that is almost always
a configuration or memory problem that would repeat, and the start must fail fast with its log.

Restarts are bounded: a replica that served for HEALTHY_RESET_S before it died starts its backoff
again at 1 s (one crash a day must not wait 30 s forever after), and a replica that died more than
NEURONSERVE_MAX_RESTARTS times within NEURONSERVE_RESTART_WINDOW_S ends the server with its last log
lines: an engine that keeps crashing is broken (a bad request pattern, failing memory, a device
fault), and a replaced instance serves better than one replica flapping forever.

Compile once: on a Neuron cache miss only replica 0 starts; it compiles into the shared artifact
directory and the others start after it is READY and the artifacts are marked complete, loading them
instead of compiling the same graphs N times in parallel (a compile takes host CPU and RAM). On a hit,
and on the CPU, all replicas start together.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from neuronserve.engine.process import EngineProcess
from neuronserve.types import LaunchPlan, ReplicaSpec

log = logging.getLogger("neuronserve.engine")

BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
# READY this long before a death: the death is not part of a crash loop, the backoff starts over.
HEALTHY_RESET_S = 300.0


class RPhase(enum.StrEnum):
    WAITING = "WAITING"  # for replica 0's compile
    LOADING = "LOADING"
    READY = "READY"
    RESTARTING = "RESTARTING"  # dead; waiting out its backoff
    FAILED = "FAILED"
    STOPPED = "STOPPED"


@dataclass(eq=False)
class Replica:
    spec: ReplicaSpec
    host: str
    phase: RPhase = RPhase.WAITING
    healthy: bool = False
    outstanding: int = 0  # requests routed here and not finished (a stream counts until it ends)
    routed: int = 0  # requests routed here since start (the front's per-replica count)
    restarts: int = 0
    ever_ready: bool = False
    streak: int = 0  # deaths since the replica last served HEALTHY_RESET_S: the backoff's exponent
    ready_since: float | None = None  # clock time of the last READY
    deaths: list[float] = field(default_factory=list)  # clock times of deaths after READY, in the window
    retry_at: float = 0.0
    detail: str = ""
    proc: EngineProcess | None = field(default=None, repr=False)

    @property
    def index(self) -> int:
        return self.spec.index

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.spec.port}"

    def serving(self) -> bool:
        """May take requests: READY, its last health check passed, and its process alive."""
        return (
            self.phase == RPhase.READY
            and self.healthy
            and self.proc is not None
            and self.proc.returncode() is None
        )

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "phase": str(self.phase), "cores": self.spec.cores}
        if self.detail:
            out["detail"] = self.detail
        if self.restarts:
            out["restarts"] = self.restarts
        return out


@dataclass(frozen=True)
class Fatal:
    """No replica can serve: the server must exit non-zero, explaining with the last engine lines."""

    message: str
    lines: list[str]
    rc: int | None


class ReplicaPool:
    def __init__(
        self,
        plan: LaunchPlan,
        environ: Mapping[str, str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.plan = plan
        self.environ = environ
        self.clock = clock
        self.replicas = [Replica(spec, plan.engine_host) for spec in plan.replicas]
        self.server_ready = False  # set by the supervisor once /ping first went 200
        # Called with a replica index when that replica's engine is gone (its sessions must close).
        self.on_replaced: Callable[[int], object] = lambda _index: None
        # Called with a replica index each time its engine process starts (metrics count them).
        self.on_start: Callable[[int], object] = lambda _index: None

    # --- counts -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.replicas)

    def ready_count(self) -> int:
        return sum(1 for r in self.replicas if r.serving())

    def min_ready(self) -> int:
        """READY replicas /ping needs: the setting, else all at start and one after."""
        configured = self.plan.serve.min_ready_replicas
        if configured is not None:
            return configured
        return 1 if self.server_ready else len(self.replicas)

    def enough_ready(self) -> bool:
        return self.ready_count() >= self.min_ready()

    def stuck(self) -> str | None:
        """Why no engine can make progress any more (none running, none due a restart), else None: the
        engine check of /live. A replica WAITING for replica 0's compile goes on only if that one runs."""
        for r in self.replicas:
            if r.phase == RPhase.RESTARTING:
                return None
            if (
                r.phase in (RPhase.LOADING, RPhase.READY)
                and r.proc is not None
                and r.proc.returncode() is None
            ):
                return None
        if len(self.replicas) == 1:
            r = self.replicas[0]
            return f"the engine exited with code {_rc(r)} and nothing restarts it"
        states = "; ".join(
            f"replica {r.index} {r.phase}" + (f" ({r.detail})" if r.detail else "") for r in self.replicas
        )
        return f"no engine replica is running or due a restart: {states}"

    def describe(self) -> list[dict[str, Any]]:
        return [r.describe() for r in self.replicas]

    def pids(self) -> str:
        """`engine pid N` (the phase line tests and people read), then each other replica's pid."""
        parts = []
        for r in self.replicas:
            if r.proc is not None and r.proc.pid is not None:
                parts.append(
                    f"engine pid {r.proc.pid}" if r.index == 0 else f"replica {r.index} pid {r.proc.pid}"
                )
        return ", ".join(parts)

    # --- starting -----------------------------------------------------------------------------
    def start_initial(self, compile_first: bool) -> None:
        """All replicas, or only replica 0 when it must compile for the others."""
        for r in self.replicas:
            if compile_first and r.index > 0:
                r.detail = "waiting for replica 0 to compile the shared artifacts"
                continue
            self._start(r)

    def waiting(self) -> list[Replica]:
        return [r for r in self.replicas if r.phase == RPhase.WAITING]

    def start_waiting(self) -> None:
        for r in self.waiting():
            self._start(r)

    def _start(self, r: Replica) -> None:
        label = "engine" if len(self.replicas) == 1 else f"engine {r.index}"
        r.proc = EngineProcess(
            r.spec.argv,
            r.spec.env,
            self.plan.work_dir,
            self.environ,
            label=label,
            nice=self.plan.serve.engine_nice,
        )
        r.proc.start()  # EngineError propagates: the caller decides whether that is fatal
        r.phase, r.healthy, r.detail = RPhase.LOADING, False, ""
        self.on_start(r.index)
        log.info(
            "replica %d started: pid %s, cores %s, port %d%s",
            r.index,
            r.proc.pid,
            r.spec.cores or "-",
            r.spec.port,
            f" (restart {r.restarts})" if r.restarts else "",
        )

    # --- watching -----------------------------------------------------------------------------
    def mark_ready(self, r: Replica) -> None:
        if r.phase == RPhase.LOADING:
            r.phase, r.healthy, r.ever_ready, r.detail = RPhase.READY, True, True, ""
            r.ready_since = self.clock()
            log.info("replica %d READY (%d of %d)", r.index, self.ready_count(), len(self.replicas))

    def poll(self) -> Fatal | None:
        """Reap dead engines and restart due ones; a Fatal when nothing can serve any more."""
        now = self.clock()
        for r in self.replicas:
            if r.phase in (RPhase.LOADING, RPhase.READY) and r.proc is not None:
                rc = r.proc.returncode()
                if rc is not None:
                    fatal = self._died(r, rc, now)
                    if fatal is not None:
                        return fatal
            elif r.phase == RPhase.RESTARTING and now >= r.retry_at:
                r.restarts += 1
                try:
                    self._start(r)
                except Exception as err:  # cannot even exec: try again later, within the limit
                    why = f"restart failed: {err}"
                    fatal = self._crash_loop(r, why, now, [], None)
                    if fatal is not None:
                        return fatal
                    self._schedule(r, now, why)
        if not self.server_ready:
            alive = sum(1 for r in self.replicas if r.phase not in (RPhase.FAILED, RPhase.STOPPED))
            if alive < self.min_ready():
                dead = next(r for r in self.replicas if r.phase == RPhase.FAILED)
                what = "the engine" if len(self.replicas) == 1 else f"replica {dead.index}'s engine"
                when = "" if len(self.replicas) == 1 else " before it was READY"
                return Fatal(f"{what} exited with code {_rc(dead)}{when}", self._lines(dead), _rc(dead))
        return None

    def _died(self, r: Replica, rc: int, now: float) -> Fatal | None:
        lines = self._lines(r)
        was_ready = r.ever_ready
        r.healthy = False
        self.on_replaced(r.index)
        if r.proc is not None:
            r.proc.stop(grace_s=0)  # sweep workers that outlived the main process
        if not was_ready or not self.server_ready:
            r.phase, r.detail = RPhase.FAILED, f"engine exited with code {rc}"
            return None  # start-up verdict in poll(): fatal only if too few replicas remain
        if len(self.replicas) == 1 or self.ready_count() == 0:
            r.phase, r.detail = RPhase.FAILED, f"engine exited with code {rc}"
            what = "the engine" if len(self.replicas) == 1 else f"replica {r.index}'s engine"
            extra = "" if len(self.replicas) == 1 else " and no other replica is READY"
            return Fatal(f"{what} exited with code {rc}{extra}", lines, rc)
        fatal = self._crash_loop(r, f"engine exited with code {rc}", now, lines, rc)
        if fatal is not None:
            return fatal
        log.warning(
            "replica %d: engine exited with code %d; the other replicas serve; its last lines:\n%s",
            r.index,
            rc,
            "\n".join(f"  | {line}" for line in lines[-15:]),
        )
        self._schedule(r, now, f"engine exited with code {rc}")
        return None

    def _crash_loop(self, r: Replica, why: str, now: float, lines: list[str], rc: int | None) -> Fatal | None:
        """Count this death (or failed restart) in the window; a Fatal once there were more than allowed."""
        if r.ready_since is not None and now - r.ready_since >= HEALTHY_RESET_S:
            r.streak = 0  # it served a good while: not a crash loop, the backoff starts over
        r.ready_since = None
        window, allowed = self.plan.serve.restart_window_s, self.plan.serve.max_restarts
        r.deaths = [t for t in r.deaths if now - t < window] + [now]
        if len(r.deaths) <= allowed:
            return None
        r.phase = RPhase.FAILED
        r.detail = f"{why}; {len(r.deaths)} failures in {window:g} s"
        return Fatal(
            f"replica {r.index}'s engine failed {len(r.deaths)} times within {window:g} s (last: {why}); "
            f"NEURONSERVE_MAX_RESTARTS={allowed} restarts are allowed within "
            f"NEURONSERVE_RESTART_WINDOW_S={window:g}: giving up instead of restarting it forever "
            "(its last lines follow; raise the limits only if the deaths are expected)",
            lines,
            rc,
        )

    def _schedule(self, r: Replica, now: float, why: str) -> None:
        delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2**r.streak)
        r.streak += 1
        r.phase, r.retry_at = RPhase.RESTARTING, now + delay
        r.detail = f"{why}; restart on cores {r.spec.cores or '-'} in {delay:.0f} s"
        log.warning("replica %d: %s", r.index, r.detail)

    @staticmethod
    def _lines(r: Replica) -> list[str]:
        return r.proc.last_lines() if r.proc is not None else []

    # --- stopping -----------------------------------------------------------------------------
    def stop_all(self, grace_s: float = 10.0) -> list[int | None]:
        """Stop every engine (each in its own thread would not be faster: SIGTERM goes out first)."""
        procs = [r.proc for r in self.replicas if r.proc is not None and r.proc.pid is not None]
        for r in self.replicas:
            if r.phase not in (RPhase.FAILED,):
                r.phase = RPhase.STOPPED
        return _stop_together(procs, grace_s)


def _rc(r: Replica) -> int | None:
    return r.proc.returncode() if r.proc is not None else None


def _stop_together(procs: list[EngineProcess], grace_s: float) -> list[int | None]:
    """SIGTERM all groups at once, then wait: N engines stop in one grace period, not N."""
    import threading  # noqa: PLC0415

    results: list[int | None] = [None] * len(procs)

    def stop(i: int) -> None:
        results[i] = procs[i].stop(grace_s)

    threads = [threading.Thread(target=stop, args=(i,), daemon=True) for i in range(len(procs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
