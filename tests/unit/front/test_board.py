"""The board across real processes: what one writes the other reads, the snapshot is never torn, and
a lock dies with its holder."""

from __future__ import annotations

import fcntl
import signal

import pytest
from tests.support import boardproc

from neuronserve.front.board import FLIGHT_LOCK, Board


@pytest.fixture
def board() -> Board:
    return Board.create(workers=2, replicas=3, sessions=4)


def test_a_child_reads_what_the_supervisor_wrote_and_writes_back(board: Board) -> None:
    board.set_flags(2, healthy=True, alive=False)
    board.set_replica(1, 3, healthy=True, alive=True, restarts=7)
    board.bump_generation(1)
    board.publish({"detail": "hello", "n": [1, 2]})
    board.set_beat(123.5)
    got = boardproc.run(
        board,
        """
        out([board.flags(), board.replica(1), board.snapshot()[1], board.beat()])
        board.flight[1] = 5
        board.rows[board.row(1, 2)] = 9
        """,
    )
    assert got == [[[2, True, False], [3, True, True, 1, 7], {"detail": "hello", "n": [1, 2]}, 123.5]]
    assert list(board.flight) == [0, 5]
    assert board.replica_totals(2) == (9, 0)
    board.forget_worker(1)
    assert list(board.flight) == [0, 0] and board.replica_totals(2) == (0, 0)


def test_attach_refuses_a_descriptor_that_is_not_a_board(tmp_path: object) -> None:
    import os

    fd = os.memfd_create("other")
    os.ftruncate(fd, Board.size_of(1, 1, 0))
    with pytest.raises(ValueError, match="not a neuronserve board"):
        Board.attach(fd, 1, 1, 0)


def test_snapshots_read_while_written_are_never_torn(board: Board) -> None:
    """For a second a child publishes snapshots of varying size as fast as it can; every snapshot read
    here meanwhile is one of them, whole."""
    board.publish({"i": -1, "pad": "", "check": -7})
    writer = boardproc.start(
        board,
        """
        import time
        end, i = time.monotonic() + 1.0, 0
        while time.monotonic() < end:
            board.publish({"i": i, "pad": "x" * (i % 977), "check": i * 7})
            i += 1
        out(i - 1)
        """,
    )
    seen = set()
    while writer.poll() is None:
        _, doc = board.snapshot()
        assert doc["check"] == doc["i"] * 7 and len(doc["pad"]) == max(doc["i"], 0) % 977
        seen.add(doc["i"])
    assert writer.returncode == 0 and writer.stdout is not None
    last = int(writer.stdout.read())
    assert len(seen) > 10 and board.snapshot()[1]["i"] == last


def test_a_lock_dies_with_its_holder(board: Board) -> None:
    holder = boardproc.start(
        board,
        """
        board.flight_lock.__enter__()
        out("held")
        sys.stdin.readline()
        """,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == '"held"'
    with pytest.raises(BlockingIOError):
        fcntl.lockf(board.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, FLIGHT_LOCK)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with board.flight_lock:  # released by the kernel: no wedge
        pass


def test_a_snapshot_read_in_a_second_thread_waits_for_the_first(board: Board) -> None:
    """The file lock is the process's, shared by its threads (a worker's loop and probe door both read
    the state): while one thread holds the snapshot, another thread's read waits for it."""
    import threading

    board.publish({"n": 1})
    got: list[dict[str, int]] = []
    reader = threading.Thread(target=lambda: got.append(board.snapshot()[1]))
    with board._snapshot_held():
        reader.start()
        reader.join(0.3)
        assert reader.is_alive() and not got  # held: the second thread waits
    reader.join(5)
    assert got == [{"n": 1}]


def test_fields_rewritten_with_the_same_values_are_never_read_as_anything_else(board: Board) -> None:
    """For a second a child rewrites a replica's row (READY, healthy, alive), the heartbeat and the
    restarts with the values they already hold, as the supervisor does at every poll; every read here
    meanwhile sees those values. struct.pack_into cleared each field to zero first, and a reader saw
    the zeros (a replica WAITING and dead: a 503 "no engine replica is ready" under load)."""
    board.set_replica(1, 2, True, True, 7)
    board.set_beat(12345.5)
    writer = boardproc.start(
        board,
        """
        import time
        end, n = time.monotonic() + 1.0, 0
        while time.monotonic() < end:
            for _ in range(200):
                board.set_replica(1, 2, True, True, 7)
                board.set_beat(12345.5)
            n += 200
        out(n)
        """,
    )
    reads = 0
    wrong: set[object] = set()
    while writer.poll() is None:
        for _ in range(200):
            phase, healthy, alive, _, restarts = board.replica(1)
            if (phase, healthy, alive, restarts) != (2, True, True, 7):
                wrong.add((phase, healthy, alive, restarts))
            if board.beat() != 12345.5:
                wrong.add(board.beat())
        reads += 200
    assert writer.returncode == 0 and writer.stdout is not None
    assert int(writer.stdout.read()) > 10_000 and reads > 10_000
    assert not wrong, f"read {sorted(map(str, wrong))} in {reads} reads"
