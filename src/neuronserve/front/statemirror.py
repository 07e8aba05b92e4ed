"""A front worker's server state: the supervisor's, read from the board (NEURONSERVE_FRONT_WORKERS > 1).

Why a mirror and not messages: /ping, /live and every gated request read the phase, and all workers
must agree with the supervisor at once. The phase, engine health and engine liveness are bytes on
the board (front/board.py), read on every access; the rest (detail, progress, model names, replicas,
the supervisor's /live verdict) is a JSON snapshot the supervisor writes at each poll and at each phase
move, taken here when its sequence number moved. The supervisor writes the snapshot before the phase
byte, and a worker that sees a new phase takes the snapshot first: a request admitted at READY finds
the model names.

/live combines this worker's own event-loop verdict (its watchdog) with the supervisor's: the
supervisor's heartbeat on the board tells whether it still polls, so a wedged supervisor is reported
by every worker even though it cannot say so itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from neuronserve.front.board import Board
from neuronserve.front.state import Phase, ServerState, Snapshot

PHASES = tuple(Phase)  # the board's phase code is an index into this
SUPERVISOR_STALL_S = 30.0  # the supervisor's /live verdict: this long without a poll, it is wedged


def phase_code(phase: Phase) -> int:
    return PHASES.index(phase)


class MirroredState(ServerState):
    """ServerState whose phase and fields are the supervisor's (read-only here: `move` refuses)."""

    def __init__(
        self, board: Board, stall_s: float = SUPERVISOR_STALL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(clock)
        self._board = board
        self._stall_s = stall_s  # the supervisor's heartbeat older than this: it is wedged
        self._seq = -1
        self._code = -1
        self.engine_alive = lambda: board.flags()[2]
        self.supervisor_verdict = self._supervisor
        self._verdict: str | None = None
        self._take()

    @property
    def phase(self) -> Phase:
        code = self._board.phase_code()
        if code != self._code:
            self._take()  # the snapshot first: it was written before the phase byte
            self._code = code
        return PHASES[code]

    def move(self, to: Phase, detail: str = "") -> bool:
        raise RuntimeError("a front worker does not move the phase: the supervisor does")

    def ready(self) -> bool:
        code, healthy, alive = self._board.flags()
        return PHASES[code] == Phase.READY and healthy and alive and self.loop_verdict() is None

    def snapshot(self) -> Snapshot:
        self._take()
        return Snapshot(self.phase, self._board.flags()[1], self._progress, self._detail, self._since)

    def _take(self) -> None:
        seq = self._board.seq()
        if seq == self._seq:
            return
        seq, doc = self._board.snapshot()
        if doc:
            self.adopt(doc)
            self._verdict = doc["verdict"]
        self._seq = seq

    def _supervisor(self) -> str | None:
        quiet = self._clock() - self._board.beat()
        if self._board.beat() and quiet > self._stall_s:
            return f"the engine supervisor has not polled for {quiet:.0f} s"
        self._take()
        return self._verdict


def publish(board: Board, state: ServerState, verdict: str | None) -> None:
    """The supervisor's side: the snapshot, then the bytes (phase last), then its heartbeat."""
    board.publish(state.shared(verdict))
    board.set_flags(phase_code(state.phase), state.snapshot().engine_healthy, state.engine_alive())
    board.set_beat(time.monotonic())
