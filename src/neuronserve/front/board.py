"""Shared memory between the supervisor and the front workers (NEURONSERVE_FRONT_WORKERS > 1).

Why one board: what must stay global with several front processes (docs/RELIABILITY.md, "Front
workers") is small and fixed in size, so it lives in one memfd that the supervisor creates before the
workers start and each worker maps (its descriptor is inherited). Nothing here is used with one front
process: the default pays nothing for it.

Who writes what (one writer per field, so most fields need no lock):
- the supervisor: its heartbeat, the phase, health and engine-alive bytes, a JSON snapshot of the rest
  of the server state (detail, staging progress, model names, replicas, its /live verdict: written and
  read under its own lock, before the phase byte so a worker that sees READY finds the model names),
  and each replica's phase, health, liveness, generation (its engine deaths) and restarts;
- each worker: its in-flight count (limiter.py), per replica its outstanding and routed counts, and its
  heartbeat (serve/worker.py: its event loop stamps it; the supervisor replaces a worker whose
  heartbeat is older than NEURONSERVE_FRONT_WORKER_TIMEOUT_S, serve/workers.py);
- every process: the session ledger (sessions.py), under its own lock.

Locks are fcntl.lockf byte ranges of the memfd: the kernel drops a lock whose holder dies.

Why the snapshot has a lock and not only a sequence lock (its sequence number, odd while written,
re-read after the copy, as it was first built): the lock-free read was seen torn once in a CI run
(tests/unit/front/test_board.py: a snapshot's new length with its old bytes, the sequence unchanged
around the copy). The cause, found later: the sequence number was written with struct.pack_into,
which writes zeros before the value (next paragraph), so a reader could read 0 before its copy and
0 again after it (two writes' zero windows): even and equal, a torn copy accepted. The lock, which
the writer and each reader take, does not depend on how the fields are written; it costs two system
calls per publish and per snapshot read, and a worker re-reads the snapshot only when the sequence
number moved (statemirror.py).

Why no field is written with struct.pack_into: it clears its target to zero bytes before it packs the
values (CPython's Modules/_struct.c, s_pack_internal: `memset(buf, '\0', soself->s_size)`), so a
process reading the field meanwhile can see zeros that were never written. With two front workers
under load that was a replica read as WAITING and not alive, a request answered 503 "no engine
replica is ready" (one request in 20,000 to 190,000 here), and a heartbeat read as 0 (the /live
verdict "the engine supervisor has not polled"). A process reading a byte that another rewrote with
pack_into in a loop saw zero in 0.4 % of its reads; tests/unit/front/test_board.py checks that no
such read is seen now. `put` packs the values first and copies the finished
bytes in (mmap slice assignment, a memcpy): each byte goes from its old value straight to its new
one, and a value that did not change is never seen changed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import mmap
import os
import struct
import threading
from collections.abc import Iterator
from typing import Any

MAGIC = b"NSBOARD1"
HEADER = 64
BLOB_BYTES = 256 * 1024  # the snapshot's JSON: the replicas list and a progress line, far below this
REPLICA_BYTES = 16
LEDGER_SLOT = 32  # sessions.py: nonce (16), expiry (8), home (2), pad (2), generation (4)
LEDGER_HEADER = 16  # occupied count, allocation cursor, earliest expiry
# header fields
_BEAT = 8  # f64: the supervisor's last poll (time.monotonic: CLOCK_MONOTONIC, one clock for the host)
_PHASE, _HEALTHY, _ALIVE = 16, 17, 18  # u8 each
_SEQ, _LEN = 24, 32  # u64 snapshot sequence (odd while written), u32 its length
# lock bytes (ranges of the file, not data)
FLIGHT_LOCK, LEDGER_LOCK, SNAPSHOT_LOCK = 0, 1, 2


def put(buf: Any, layout: str | struct.Struct, at: int, *values: Any) -> None:
    """`values` packed by `layout` into `buf` at `at`, never passing through zero bytes (module
    docstring): the board's fields and the session ledger's slots (sessionstore.py)."""
    data = layout.pack(*values) if isinstance(layout, struct.Struct) else struct.pack(layout, *values)
    buf[at : at + len(data)] = data


class FileLock:
    """An exclusive lock on one byte range of a file (POSIX record lock: per process, released by the
    kernel when the holder exits, however it exits)."""

    def __init__(self, fd: int, offset: int) -> None:
        self.fd = fd
        self.offset = offset

    def __enter__(self) -> None:
        fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, self.offset)

    def __exit__(self, *_: object) -> None:
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.offset)


class Board:
    """The layout over one shared file: `create` in the supervisor, `attach` in a worker."""

    def __init__(self, fd: int, workers: int, replicas: int, sessions: int) -> None:
        self.fd = fd
        self.workers, self.replicas, self.sessions = workers, replicas, sessions
        self._flight_at = HEADER
        self._replicas_at = self._flight_at + 8 * workers
        self._rows_at = self._replicas_at + REPLICA_BYTES * replicas
        self._blob_at = self._rows_at + 16 * workers * replicas
        self._ledger_at = self._blob_at + BLOB_BYTES
        self._beats_at = self._ledger_at + LEDGER_HEADER + LEDGER_SLOT * sessions
        self.size = self.size_of(workers, replicas, sessions)
        self.map = mmap.mmap(fd, self.size)
        view = memoryview(self.map)
        self.flight = view[self._flight_at : self._replicas_at].cast("q")
        self.rows = view[self._rows_at : self._blob_at].cast(
            "q"
        )  # (outstanding, routed) per worker x replica
        self.ledger = view[self._ledger_at : self._beats_at]
        self._published = b""  # the last snapshot this process wrote
        self.flight_lock = FileLock(fd, FLIGHT_LOCK)
        self.ledger_lock = FileLock(fd, LEDGER_LOCK)
        # A record lock is the process's, so two threads of one process (the supervisor's loop and its
        # staging thread both reach the state) would share it: the mutex keeps them to one at a time.
        self._snapshot_mutex = threading.Lock()
        self._snapshot_lock = FileLock(fd, SNAPSHOT_LOCK)

    @staticmethod
    def size_of(workers: int, replicas: int, sessions: int) -> int:
        return (
            HEADER
            + 8 * workers
            + (REPLICA_BYTES + 16 * workers) * replicas
            + BLOB_BYTES
            + LEDGER_HEADER
            + LEDGER_SLOT * sessions
            + 8 * workers  # the workers' heartbeats
        )

    @classmethod
    def create(cls, workers: int, replicas: int, sessions: int) -> Board:
        """A new board (zeroed: no phase, no count) on a new memfd the workers inherit (pass_fds)."""
        fd = os.memfd_create("neuronserve-board", os.MFD_CLOEXEC)
        os.ftruncate(fd, cls.size_of(workers, replicas, sessions))
        board = cls(fd, workers, replicas, sessions)
        board.map[:8] = MAGIC
        return board

    @classmethod
    def attach(cls, fd: int, workers: int, replicas: int, sessions: int) -> Board:
        board = cls(fd, workers, replicas, sessions)
        if board.map[:8] != MAGIC:
            raise ValueError("descriptor is not a neuronserve board")
        return board

    # --- the supervisor's fields -----------------------------------------------------------------
    def beat(self) -> float:
        return float(struct.unpack_from("d", self.map, _BEAT)[0])

    def set_beat(self, at: float) -> None:
        put(self.map, "d", _BEAT, at)

    def flags(self) -> tuple[int, bool, bool]:
        """(phase code, engine health, engine alive)."""
        m = self.map
        return m[_PHASE], bool(m[_HEALTHY]), bool(m[_ALIVE])

    def phase_code(self) -> int:
        return self.map[_PHASE]

    # --- each worker's heartbeat ------------------------------------------------------------------
    def worker_beat(self, worker: int) -> float:
        """When worker `worker`'s event loop last stamped its heartbeat (time.monotonic; 0: never)."""
        return float(struct.unpack_from("d", self.map, self._beats_at + 8 * worker)[0])

    def set_worker_beat(self, worker: int, at: float) -> None:
        put(self.map, "d", self._beats_at + 8 * worker, at)

    def set_flags(self, phase: int, healthy: bool, alive: bool) -> None:
        m = self.map
        m[_HEALTHY], m[_ALIVE] = int(healthy), int(alive)
        m[_PHASE] = phase  # last: a reader that sees the new phase sees the rest too

    def seq(self) -> int:
        return int(struct.unpack_from("Q", self.map, _SEQ)[0])

    @contextlib.contextmanager
    def _snapshot_held(self) -> Iterator[None]:
        with self._snapshot_mutex, self._snapshot_lock:
            yield

    def publish(self, doc: dict[str, Any]) -> None:
        """The snapshot, as JSON under the snapshot lock (one writer: the supervisor's loop); the same
        snapshot again is not written (readers re-read only what changed). The sequence number is odd
        while it is written, for readers that only look whether it moved."""
        data = json.dumps(doc, separators=(",", ":")).encode()
        if data == self._published:
            return
        self._published = data
        if len(data) > BLOB_BYTES:
            raise ValueError(f"server snapshot of {len(data)} bytes is over the board's {BLOB_BYTES}")
        with self._snapshot_held():
            seq = self.seq()
            put(self.map, "Q", _SEQ, seq + 1)  # odd: being written
            put(self.map, "I", _LEN, len(data))
            self.map[self._blob_at : self._blob_at + len(data)] = data
            put(self.map, "Q", _SEQ, seq + 2)

    def snapshot(self) -> tuple[int, dict[str, Any]]:
        """(sequence, the last snapshot), read under the snapshot lock: never while it is written."""
        with self._snapshot_held():
            seq = self.seq()
            size = struct.unpack_from("I", self.map, _LEN)[0]
            data = bytes(self.map[self._blob_at : self._blob_at + size])
        return seq, json.loads(data) if data else {}

    # --- replicas (written by the supervisor) ----------------------------------------------------
    def replica(self, index: int) -> tuple[int, bool, bool, int, int]:
        """(phase code, healthy, alive, generation, restarts) of replica `index`."""
        at = self._replicas_at + REPLICA_BYTES * index
        phase, healthy, alive, _, generation, restarts = struct.unpack_from("BBBBII", self.map, at)
        return phase, bool(healthy), bool(alive), generation, restarts

    def set_replica(self, index: int, phase: int, healthy: bool, alive: bool, restarts: int) -> None:
        at = self._replicas_at + REPLICA_BYTES * index
        put(self.map, "BBB", at, phase, int(healthy), int(alive))
        put(self.map, "I", at + 8, restarts)

    def generation(self, index: int) -> int:
        return int(struct.unpack_from("I", self.map, self._replicas_at + REPLICA_BYTES * index + 4)[0])

    def bump_generation(self, index: int) -> None:
        at = self._replicas_at + REPLICA_BYTES * index + 4
        put(self.map, "I", at, self.generation(index) + 1)

    # --- per worker ------------------------------------------------------------------------------
    def row(self, worker: int, replica: int) -> int:
        """Index into `rows` of worker's (outstanding, routed) for replica."""
        return 2 * (worker * self.replicas + replica)

    def replica_totals(self, replica: int) -> tuple[int, int]:
        """(outstanding, routed) of one replica, summed over the workers."""
        rows = self.rows
        out = routed = 0
        for w in range(self.workers):
            i = self.row(w, replica)
            out += rows[i]
            routed += rows[i + 1]
        return out, routed

    def forget_worker(self, worker: int) -> None:
        """A dead worker's requests are gone: its in-flight count and outstanding counts go to 0 (its
        routed counts stay: they count requests that happened)."""
        self.flight[worker] = 0
        for r in range(self.replicas):
            self.rows[self.row(worker, r)] = 0

    def close(self) -> None:
        for view in (self.flight, self.rows, self.ledger):
            view.release()
        with contextlib.suppress(BufferError):
            self.map.close()
