"""The server's phase as an explicit state machine, read by /ping without touching the engine.

Why explicit: the health answer must never depend on an inline call to a (possibly saturated) engine.
The supervisor moves the phase; a background poller stores the engine's last /health result here.
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
        # death at once, without waiting for the supervisor's next poll.
        self.engine_alive: Callable[[], bool] = lambda: True
        # Set with several replicas: each one's phase, listed in the 503 body (and enough_ready above).
        self.replicas: Callable[[], list[dict[str, Any]]] | None = None

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
            now = self._clock()
            took, self._since = now - self._since, now
            self._detail = detail
            if to != Phase.READY:
                self._healthy = False
        log.info("phase %s -> %s after %.1f s%s", old, to, took, f": {detail}" if detail else "")
        return True

    def set_progress(self, progress: Progress) -> None:
        self._progress = progress

    def set_engine_health(self, healthy: bool) -> None:
        self._healthy = healthy

    def ready(self) -> bool:
        """True only when /ping may answer 200: READY and the engine's last health check passed."""
        return self._phase == Phase.READY and self._healthy and self.engine_alive()

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(self._phase, self._healthy, self._progress, self._detail, self._since)

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
        body["elapsed_s"] = round(self._clock() - snap.since, 1)
        return body
