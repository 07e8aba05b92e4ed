"""Sticky sessions' ledger: which ids are open, until when, in a fixed array of slots addressed by the id.

Why the id carries its replica: every front process (NEURONSERVE_FRONT_WORKERS) must send a session to
the same engine, and a table shared for routing would put a lookup and a lock on every session request.
The id names its replica (`<nonce>-<slot>-<replica>`, hex), so any worker routes it from the id alone.

Why a ledger still: the session contract (sessions.py) refuses an id that was closed, has expired or
was never issued (400), and NEURONSERVE_MAX_SESSIONS bounds the sessions open at once (429). No id
can say "I was closed", so each open session holds one 32-byte slot: the id's 128-bit random nonce,
its expiry, its replica and that replica's generation when it opened (its engine deaths). A lookup
reads the one slot the id names, without a lock: the nonce must match (a forged or closed id does
not), the expiry lie ahead, and the replica's generation be unchanged (a session never outlives its
replica's engine: the new engine has none of its cache, and the client must learn that).

With one front process the slots are this process's anonymous memory; with several they are part of
the board (board.py) and opens and closes hold its lockf lock. Memory is mapped lazily: a page is
touched when a slot on it is first used.

Expired slots are reclaimed when an open finds every slot taken (and something may have expired:
the earliest expiry is kept), or when the allocation cursor passes them.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
import struct
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from neuronserve.front.board import put

log = logging.getLogger("neuronserve.front")

SLOT = struct.Struct("=16sdHxxI")  # nonce, expiry, replica, (pad), replica generation
HEAD = struct.Struct("=IId")  # occupied slots, allocation cursor, earliest expiry among them (0: none)
HEAD_BYTES = 16
EMPTY = bytes(16)
_ID = re.compile(r"([0-9a-f]{32})-([0-9a-f]{1,8})-([0-9a-f]{1,4})")


class SessionsFull(Exception):
    """NEURONSERVE_MAX_SESSIONS sessions are open: a new one is refused (429) until some close or expire."""


class Generations(Protocol):
    """Each replica's generation: bumped when its engine dies (its sessions close)."""

    def generation(self, index: int) -> int: ...

    def bump_generation(self, index: int) -> None: ...


class LocalGenerations:
    def __init__(self) -> None:
        self._gen: dict[int, int] = {}

    def generation(self, index: int) -> int:
        return self._gen.get(index, 0)

    def bump_generation(self, index: int) -> None:
        self._gen[index] = self._gen.get(index, 0) + 1


def ledger_bytes(max_sessions: int) -> int:
    return HEAD_BYTES + SLOT.size * max_sessions


class SessionStore:
    """Open, look up and close sessions; at most `max_sessions` open at once."""

    def __init__(
        self,
        ttl_s: float,
        clock: Callable[[], float] = time.time,
        max_sessions: int = 10_000,
        *,
        ledger: memoryview | None = None,
        lock: AbstractContextManager[Any] | None = None,
        generations: Generations | None = None,
    ) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self.max_sessions = max_sessions
        if ledger is None:  # one process: anonymous memory, zero pages until used
            self._map = mmap.mmap(-1, ledger_bytes(max_sessions))
            ledger = memoryview(self._map)
        self._buf = ledger
        self._lock: AbstractContextManager[Any] = lock if lock is not None else threading.Lock()
        self.generations = generations if generations is not None else LocalGenerations()

    # --- the three operations of the contract ----------------------------------------------------
    def open(self, replica: int) -> tuple[str, float]:
        nonce = os.urandom(16)
        while nonce == EMPTY:
            nonce = os.urandom(16)
        now = self.clock()
        expires = now + self.ttl_s
        generation = self.generations.generation(replica)
        with self._lock:
            count, cursor, earliest = HEAD.unpack_from(self._buf, 0)
            if count >= self.max_sessions and earliest and now >= earliest:
                count, earliest = self._reclaim(now)
            if count >= self.max_sessions:
                raise SessionsFull(
                    f"{count} sessions are open, the limit (NEURONSERVE_MAX_SESSIONS); "
                    "close one or retry later"
                )
            slot, count = self._free_slot(cursor, count, now)
            put(self._buf, SLOT, self._at(slot), nonce, expires, replica, generation)
            earliest = min(earliest, expires) if earliest else expires
            put(self._buf, HEAD, 0, count + 1, (slot + 1) % self.max_sessions, earliest)
        return f"{nonce.hex()}-{slot:x}-{replica:x}", expires

    def lookup(self, sid: str) -> int | None:
        """The session's replica, or None (never issued, closed, expired, or its replica's engine died)."""
        found = self._find(sid)
        return None if found is None else found[1]

    def close(self, sid: str) -> bool:
        found = self._find(sid)
        if found is None:
            return False
        slot, _, nonce = found
        with self._lock:
            if SLOT.unpack_from(self._buf, self._at(slot))[0] != nonce:
                return False  # closed meanwhile (by another worker)
            self._free(slot)
        return True

    def close_replica(self, replica: int) -> int:
        """The replica's engine is gone: its sessions close (the generation moves on, their slots free)."""
        self.generations.bump_generation(replica)
        now = self.clock()
        closed = 0
        with self._lock:
            for slot in range(self.max_sessions):
                nonce, expires, home, _ = SLOT.unpack_from(self._buf, self._at(slot))
                if nonce != EMPTY and home == replica:
                    closed += now < expires
                    self._free(slot)
        if closed:
            log.warning("replica %d is gone: closed its %d session(s)", replica, closed)
        return closed

    def __len__(self) -> int:
        return int(HEAD.unpack_from(self._buf, 0)[0])

    # --- slots -----------------------------------------------------------------------------------
    def _at(self, slot: int) -> int:
        return HEAD_BYTES + SLOT.size * slot

    def _find(self, sid: str) -> tuple[int, int, bytes] | None:
        """(slot, replica, nonce) of an open session's id, read without the lock."""
        m = _ID.fullmatch(sid)
        if m is None:
            return None
        slot = int(m.group(2), 16)
        if slot >= self.max_sessions:
            return None
        nonce, expires, home, generation = SLOT.unpack_from(self._buf, self._at(slot))
        if (
            nonce != bytes.fromhex(m.group(1))
            or home != int(m.group(3), 16)
            or self.clock() >= expires
            or self.generations.generation(home) != generation
        ):
            return None
        return slot, home, nonce

    def _free(self, slot: int) -> None:
        """(with the lock held) The slot holds no session any more."""
        self._buf[self._at(slot) : self._at(slot) + 16] = EMPTY
        count, cursor, earliest = HEAD.unpack_from(self._buf, 0)
        put(self._buf, HEAD, 0, count - 1, cursor, earliest)

    def _free_slot(self, cursor: int, count: int, now: float) -> tuple[int, int]:
        """(with the lock held) The first slot from the cursor holding no live session (an expired one
        found on the way is reclaimed), and the occupied count after any reclaim."""
        n = self.max_sessions
        for step in range(n):
            slot = (cursor + step) % n
            nonce, expires = SLOT.unpack_from(self._buf, self._at(slot))[:2]
            if nonce == EMPTY:
                return slot, count
            if now >= expires:
                return slot, count - 1  # reused in place: one session out, one in
        raise SessionsFull("no free session slot")  # unreachable while count < max_sessions

    def _reclaim(self, now: float) -> tuple[int, float]:
        """(with the lock held) Free every expired slot; the new count and earliest expiry."""
        count = 0
        earliest = 0.0
        for slot in range(self.max_sessions):
            nonce, expires = SLOT.unpack_from(self._buf, self._at(slot))[:2]
            if nonce == EMPTY:
                continue
            if now >= expires:
                self._buf[self._at(slot) : self._at(slot) + 16] = EMPTY
                continue
            count += 1
            earliest = min(earliest, expires) if earliest else expires
        _, cursor, _ = HEAD.unpack_from(self._buf, 0)
        put(self._buf, HEAD, 0, count, cursor, earliest)
        return count, earliest
