"""The session ledger shared by front processes: an id opened in one process is open, closed or
expired in every other; the cap counts the container's sessions; a replica's death closes its sessions
everywhere; ids that were never issued are refused. (The contract through the front: test_sessions.py.)"""

from __future__ import annotations

import re
from textwrap import dedent

import pytest
from tests.support import boardproc
from tests.support.replicas import Clock

from neuronserve.front.board import Board
from neuronserve.front.sessionstore import SessionsFull, SessionStore

CHILD = """
from neuronserve.front.sessionstore import SessionStore
store = SessionStore(60.0, max_sessions=board.sessions, ledger=board.ledger, lock=board.ledger_lock,
                     generations=board)
"""


def _shared(board: Board, ttl_s: float = 60.0, clock: Clock | None = None) -> SessionStore:
    kwargs = {} if clock is None else {"clock": clock}
    return SessionStore(
        ttl_s,
        max_sessions=board.sessions,
        ledger=board.ledger,
        lock=board.ledger_lock,
        generations=board,
        **kwargs,
    )


def test_one_ledger_for_every_process() -> None:
    board = Board.create(workers=2, replicas=2, sessions=3)
    here = _shared(board)
    sid, _ = here.open(1)
    assert re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*", sid)
    got = boardproc.run(
        board,
        CHILD
        + dedent(f"""
        out([store.lookup({sid!r}), len(store)])
        theirs, _ = store.open(0)
        out(theirs)
        out(store.close({sid!r}))
        """),
    )
    assert got[0] == [1, 1] and got[2] is True
    theirs = got[1]
    assert here.lookup(sid) is None and not here.close(sid)  # closed by the other process
    assert here.lookup(theirs) == 0 and len(here) == 1
    here.open(0)
    here.open(1)
    with pytest.raises(SessionsFull, match="NEURONSERVE_MAX_SESSIONS"):  # 3 in the container
        here.open(0)
    got = boardproc.run(
        board, CHILD + "\ntry:\n    store.open(1)\nexcept Exception as e:\n    out(type(e).__name__)\n"
    )
    assert got == ["SessionsFull"]


def test_a_replica_death_closes_its_sessions_in_every_process() -> None:
    board = Board.create(workers=2, replicas=2, sessions=8)
    here = _shared(board)
    ones = [here.open(1)[0] for _ in range(3)]
    zero, _ = here.open(0)
    got = boardproc.run(board, CHILD + "\nout(store.close_replica(1))\n")
    assert got == [3]
    assert [here.lookup(s) for s in ones] == [None, None, None] and here.lookup(zero) == 0
    assert len(here) == 1  # their slots are free
    again, _ = here.open(1)  # a new session on the restarted replica is fine
    assert here.lookup(again) == 1


def test_expiry_and_reclaim_at_the_cap() -> None:
    clock = Clock()
    board = Board.create(workers=1, replicas=1, sessions=2)
    store = _shared(board, ttl_s=10.0, clock=clock)
    a, _ = store.open(0)
    clock.now += 5
    store.open(0)
    with pytest.raises(SessionsFull):
        store.open(0)
    clock.now += 5  # the first expires now: its slot is taken back by the next open
    assert store.lookup(a) is None
    c, _ = store.open(0)
    assert store.lookup(c) == 0 and len(store) == 2


@pytest.mark.parametrize(
    "sid",
    [
        "",
        "no-such-id",
        "NEW_SESSION",
        "0" * 32 + "-0-0",  # the empty slot's nonce
        "f" * 32 + "-0-0",  # a nonce never issued
        "f" * 32 + "-ffffffff-0",  # a slot past the ledger
        "f" * 32 + "-0-ffff",  # a replica past the pool
        "F" * 32 + "-0-0",
        "é" * 32 + "-0-0",
    ],
)
def test_ids_never_issued_are_refused(sid: str) -> None:
    store = SessionStore(60.0, max_sessions=4)
    real, _ = store.open(0)
    assert store.lookup(sid) is None and not store.close(sid)
    assert store.lookup(real) == 0
    forged = real[:32] + "-1-0"  # the real nonce at another slot
    assert store.lookup(forged) is None
    other_replica = real.rsplit("-", 1)[0] + "-1"  # the real nonce, another replica
    assert store.lookup(other_replica) is None
