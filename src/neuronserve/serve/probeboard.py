"""The answers the door's process gives, published by the front in shared memory (serve/doorprocess.py).

Why answers and not state: the door's process must not import the front (its imports are its start-up
time and memory, and the state's verdicts are callables of the front's own process: its loop
watchdog, its supervisor). So the front builds the whole bytes of each probe's answer, as its own
route would send them (serve/probedoor.py `probe_bytes`), and the door sends the bytes it finds.

Layout of one memfd (inherited by the door's process):
- 0: f64, when the answers were last published (time.monotonic: CLOCK_MONOTONIC, one clock for the
  host). The door's process hands a probe to the front's loop instead when this is older than
  STALE_S (the front is not publishing: the loop then answers, or does not, as it would without a
  door);
- 8: u32, the connections the front's loop holds (the front writes it with each publication);
- 12: u32, the connections the door's process holds (it writes it; the front's protocol counts them);
- 16: four u32 lengths;
- 32: u32, the length of the basis, then from 36 the basis (at most BASIS_BYTES): the bytes of another
  shared file the answers were built from, as the front read them before building them (with front
  workers: the supervisor's phase, health and liveness bytes and its snapshot's sequence number on
  the board, front/board.py `Board.basis_span`). The door's process reads those bytes again when a
  probe comes and uses the answers only when they are still the same: a change the supervisor made
  after the front built them sends the probe to the front's loop, which answers from the state as
  it is;
- 64: u32, how many engine processes the answers were built with alive, then their pids (u32 each,
  at most MAX_ENGINES): the door's process watches them (pidfds) and uses the answers only while
  none of them has exited; an exit sends the probe to the front's loop, which sees the death at once
  (a waitpid), as the routes and the thread door do;
- from BLOB_AT the four answers' bytes, in ANSWERS' order.

Each field has one writer. The answers are written and read under a lock on a byte of the file
(front/board.py FileLock: the kernel drops it if its holder dies), so a reader never takes one
answer's new length with another's old bytes; the counts are single words written whole
(front/board.py `put`, never through zero bytes).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
from collections.abc import Sequence

from neuronserve.front.board import FileLock, put

ANSWERS = (("/ping", False), ("/ping", True), ("/live", False), ("/live", True))  # (path, close)
SIZE = 64 * 1024
MAX_ENGINES = 200  # a trn2.48xlarge runs at most 64 replicas (one per core)
_ENGINES = 64
BLOB_AT = _ENGINES + 4 + 4 * MAX_ENGINES
STALE_S = 2.0  # published every PUBLISH_S (doorprocess.py); older than this, the front is stuck
BASIS_BYTES = 24
_BEAT, _FRONT, _DOOR, _LENS, _BASIS = 0, 8, 12, 16, 32
_LENGTHS = struct.Struct("<4I")
_U32 = struct.Struct("<I")
_F64 = struct.Struct("<d")


class ProbeBoard:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.map = mmap.mmap(fd, SIZE)
        self._lock = FileLock(fd, 0)
        self._mutex = threading.Lock()  # a record lock is the process's: one of its threads at a time

    @classmethod
    def create(cls) -> ProbeBoard:
        fd = os.memfd_create("neuronserve-probes", os.MFD_CLOEXEC)
        os.ftruncate(fd, SIZE)
        return cls(fd)

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)

    # the front's side
    def publish(
        self, answers: list[bytes], front_connections: int, basis: bytes = b"", engines: Sequence[int] = ()
    ) -> bool:
        """Write the four answers (ANSWERS' order), the basis they were built from, the engines they
        were built with alive (the first MAX_ENGINES) and the loop's connection count; False when they
        do not fit (then nothing is written, and the door's process soon finds the answers stale)."""
        blob = b"".join(answers)
        if BLOB_AT + len(blob) > SIZE or len(basis) > BASIS_BYTES:
            return False
        pids = list(engines)[:MAX_ENGINES]
        with self._mutex, self._lock:
            self.map[BLOB_AT : BLOB_AT + len(blob)] = blob
            put(self.map, _LENGTHS, _LENS, *(len(a) for a in answers))
            put(self.map, f"<I{len(basis)}s", _BASIS, len(basis), basis)
            put(self.map, f"<I{len(pids)}I", _ENGINES, len(pids), *pids)
            put(self.map, _U32, _FRONT, front_connections)
            put(self.map, _F64, _BEAT, time.monotonic())
        return True

    def door_held(self) -> int:
        return int(_U32.unpack_from(self.map, _DOOR)[0])

    # the door's side
    def read(self, path: str, close: bool, basis: bytes = b"") -> tuple[bytes | None, tuple[int, ...]]:
        """The published answer to `path`, with the engines (pids) it was built with alive, read under
        one lock; the answer is None when none is published, it is older than STALE_S, or it was built
        from another basis than `basis` (the watched bytes as they are now)."""
        index = ANSWERS.index((path, close))
        with self._mutex, self._lock:
            (count,) = _U32.unpack_from(self.map, _ENGINES)
            engines = struct.unpack_from(f"<{count}I", self.map, _ENGINES + 4)
            if time.monotonic() - _F64.unpack_from(self.map, _BEAT)[0] > STALE_S:
                return None, engines
            (size,) = _U32.unpack_from(self.map, _BASIS)
            if self.map[_BASIS + 4 : _BASIS + 4 + size] != basis:
                return None, engines
            lengths = _LENGTHS.unpack_from(self.map, _LENS)
            if not all(lengths):
                return None, engines
            at = BLOB_AT + sum(lengths[:index])
            return bytes(self.map[at : at + lengths[index]]), engines

    def front_connections(self) -> int:
        return int(_U32.unpack_from(self.map, _FRONT)[0])

    def set_door_held(self, count: int) -> None:
        put(self.map, _U32, _DOOR, count)
