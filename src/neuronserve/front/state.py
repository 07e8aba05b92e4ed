"""The server's phase as an explicit state machine, read by /ping and /live without touching the engine.

Why explicit: the health answer must never depend on an inline call to a (possibly saturated) engine.
The supervisor moves the phase; a background poller stores the engine's last /health result here.

Readiness and liveness are two answers (docs/DESIGN.md, "Probes"): /ping is 200 only when READY and the
event loop that answers it runs on time (the watchdog's verdict, serve/watchdog.py: a loop that ran
late past NEURONSERVE_LIVE_LOOP_STALL_S serves requests late too, so the load balancer should know); /live
is 200 in every phase while the process makes progress, and 503 naming the check that failed when it
is wedged: the event loop stalled (the watchdog thread's verdict, serve/watchdog.py: a stalled loop
cannot see its own stall), staging advanced by no byte and no file for NEURONSERVE_LIVE_STAGE_STALL_S,
or the engine supervisor can no longer make progress (its verdict, serve/lifecycle.py) or the server
FAILED. Compiling alone is never "stuck": a compile can print nothing for many minutes.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neuronserve.types import Progress

log = logging.getLogger("neuronserve.front")


class Phase(enum.StrEnum):
    STAGING = "STAGING"
    LOADING = "LOADING"
    READY = "READY"
    DRAINING = "DRAINING"
    FAILED = "FAILED"


# Allowed moves. FAILED and DRAINING are terminal for readiness: nothing leads back to READY.
_NEXT: dict[Phase, frozenset[Phase]] = {
    Phase.STAGING: frozenset({Phase.LOADING, Phase.DRAINING, Phase.FAILED}),
    Phase.LOADING: frozenset({Phase.READY, Phase.DRAINING, Phase.FAILED}),
    Phase.READY: frozenset({Phase.DRAINING, Phase.FAILED}),
    Phase.DRAINING: frozenset({Phase.FAILED}),
    Phase.FAILED: frozenset(),
}


def _fine() -> str | None:
    return None


class TransitionError(ValueError):
    """A move the state machine does not allow (a supervisor bug, never a user error)."""


@dataclass(frozen=True)
class Snapshot:
    phase: Phase
    engine_healthy: bool
    progress: Progress | None
    detail: str
    since: float


class ServerState:
    """Thread-safe holder: staging runs in a worker thread, the rest on the event loop."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._phase = Phase.STAGING
        self._since = clock()
        self._progress: Progress | None = None
        self._detail = ""
        self._healthy = False
        self.model_name: str | None = None  # the engine's served model name, for TGI translation
        self.model_names: list[str] = []  # every name the engine serves (/v1/models), set at READY
        self.max_model_len: int | None = None  # from /v1/models, for TGI's /info
        self.model_dtype: str = "auto"  # the engine's --dtype, for TGI's /info
        self.device: str = ""  # neuron | cpu, for TGI's /info
        self.stack: dict[str, str] = {}  # the plan's stack lane, for /info and /version
        # Set by the supervisor once the engine runs: a non-blocking waitpid, so /ping reports an engine
        # death without waiting for the supervisor's next poll.
        self.engine_alive: Callable[[], bool] = lambda: True
        # Set with several replicas: each one's phase, listed in the 503 body (and enough_ready above).
        self.replicas: Callable[[], list[dict[str, Any]]] | None = None
        # Liveness (/live), set by serve/: the loop watchdog's verdict and the supervisor's (its poll
        # loop, its tasks, the engines), each None while fine, else why the process is wedged; and the
        # seconds staging may go without advancing (0 = never wedged).
        self.loop_verdict: Callable[[], str | None] = _fine
        self.supervisor_verdict: Callable[[], str | None] = _fine
        self.stage_stall_s = 0.0
        self._advanced = self._since  # when staging last advanced (a new step or more bytes)
        self._failed_check = "engine"  # the /live check a FAILED phase is reported under
        # Called after each phase move and each change of the engine's health: the supervisor publishes
        # it to its front workers at once.
        self._listeners: list[Callable[[], object]] = []

    @property
    def phase(self) -> Phase:
        return self._phase

    def move(self, to: Phase, detail: str = "") -> bool:
        """Change phase; returns False (no-op) when already there, raises on a forbidden move."""
        with self._lock:
            if to == self._phase:
                return False
            if to not in _NEXT[self._phase]:
                raise TransitionError(f"phase {self._phase} -> {to} is not allowed")
            old, self._phase = self._phase, to
            if to == Phase.FAILED:
                self._failed_check = "stage" if old == Phase.STAGING else "engine"
            now = self._clock()
            took, self._since = now - self._since, now
            self._detail = detail
            if to != Phase.READY:
                self._healthy = False
        log.info("phase %s -> %s after %.1f s%s", old, to, took, f": {detail}" if detail else "")
        self._changed()
        return True

    def on_change(self, listener: Callable[[], object]) -> None:
        """Call `listener` after every change of what /ping answers (a phase move, the engine's health),
        in the thread that made it."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    def set_progress(self, progress: Progress) -> None:
        """Called every few seconds while a step runs (stage/progress.py); the same step at the same
        byte count is no advance."""
        last = self._progress
        if last is None or (last.what, last.done_bytes) != (progress.what, progress.done_bytes):
            self._advanced = self._clock()
        self._progress = progress

    def set_engine_health(self, healthy: bool) -> None:
        if healthy != self._healthy:
            self._healthy = healthy
            self._changed()

    def ready(self) -> bool:
        """True only when /ping may answer 200: READY, the engine's last health check passed, and the
        event loop runs on time."""
        return (
            self._phase == Phase.READY
            and self._healthy
            and self.engine_alive()
            and self.loop_verdict() is None
        )

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(self._phase, self._healthy, self._progress, self._detail, self._since)

    def live(self) -> tuple[bool, dict[str, Any]]:
        """/live: (live, body). The body names each check, "ok" or why it failed, and the failed ones."""
        snap = self.snapshot()
        checks = {"loop": self.loop_verdict(), "stage": None, "engine": None}
        if snap.phase == Phase.STAGING:
            checks["stage"] = self._stage_stalled(snap)
        elif snap.phase == Phase.FAILED:
            checks[self._failed_check] = f"the server failed and is exiting: {snap.detail or 'no detail'}"
        if snap.phase != Phase.FAILED:
            checks["engine"] = self.supervisor_verdict()
        failed = [name for name, why in checks.items() if why is not None]
        body: dict[str, Any] = {
            "live": not failed,
            "phase": str(snap.phase),
            "checks": {name: why or "ok" for name, why in checks.items()},
        }
        if failed:
            body["failed"] = failed
        return not failed, body

    def _stage_stalled(self, snap: Snapshot) -> str | None:
        bound = self.stage_stall_s
        idle = self._clock() - max(self._advanced, snap.since)
        if not bound or idle <= bound:
            return None
        p = snap.progress
        at = f"; last: {p.what} at {p.done_bytes} bytes" if p is not None else ""
        return f"staging has not advanced for {idle:.0f} s (NEURONSERVE_LIVE_STAGE_STALL_S={bound:g}){at}"

    def shared(self, verdict: str | None) -> dict[str, Any]:
        """What front workers mirror of this state (statemirror.py), with the supervisor's /live verdict;
        the phase, health and liveness travel as bytes beside it (front/board.py)."""
        snap = self.snapshot()
        p = snap.progress
        return {
            "detail": snap.detail,
            "since": snap.since,
            "progress": None if p is None else [p.what, p.done_bytes, p.total_bytes, p.rate_bps, p.eta_s],
            "advanced": self._advanced,
            "failed_check": self._failed_check,
            "model_name": self.model_name,
            "model_names": self.model_names,
            "max_model_len": self.max_model_len,
            "replicas": None if self.replicas is None else self.replicas(),
            "verdict": verdict,
        }

    def adopt(self, doc: dict[str, Any]) -> None:
        """Take the fields `shared` gave (in a front worker); the phase is the mirror's own to read."""
        with self._lock:
            self._detail, self._since = doc["detail"], doc["since"]
            p = doc["progress"]
            self._progress = None if p is None else Progress(*p)
            self._advanced, self._failed_check = doc["advanced"], doc["failed_check"]
        self.model_name, self.model_names = doc["model_name"], doc["model_names"]
        self.max_model_len = doc["max_model_len"]
        listed = doc["replicas"]
        self.replicas = None if listed is None else (lambda: listed)

    def ping_body(self) -> dict[str, Any]:
        """The small JSON body of a 503 /ping: the phase, and progress where known."""
        snap = self.snapshot()
        body: dict[str, Any] = {"phase": str(snap.phase)}
        if self.replicas is not None:
            body["replicas"] = self.replicas()
            if snap.phase == Phase.READY:
                body["detail"] = "too few replicas READY (NEURONSERVE_MIN_READY_REPLICAS)"
            elif snap.detail:
                body["detail"] = snap.detail
        elif snap.phase in (Phase.LOADING, Phase.READY) and not self.engine_alive():
            body["phase"] = str(Phase.FAILED)
            body["detail"] = "the engine process exited"
        elif snap.phase == Phase.READY and not snap.engine_healthy:
            body["detail"] = "engine health check failing"
        elif snap.detail:
            body["detail"] = snap.detail
        if snap.phase == Phase.STAGING and snap.progress is not None:
            p = snap.progress
            body["progress"] = {
                "what": p.what,
                "done_bytes": p.done_bytes,
                "total_bytes": p.total_bytes,
                "percent": None if p.percent is None else round(p.percent, 1),
                "eta_s": None if p.eta_s is None else round(p.eta_s, 1),
            }
        loop = self.loop_verdict()
        if loop is not None:  # the loop ran late past its limit (serve/watchdog.py)
            body["loop"] = loop
            if "detail" not in body:
                body["detail"] = loop
        body["elapsed_s"] = round(self._clock() - snap.since, 1)
        return body
