"""The concurrency count: one process's, and the container's across real processes (never past the
limit under contention, and a dead holder's weight given back)."""

from __future__ import annotations

import asyncio
import signal
from textwrap import dedent

import pytest
from tests.support import boardproc
from tests.support.front_app import running_front

from neuronserve.front.board import Board
from neuronserve.front.limiter import Limiter, SharedLimiter


def test_the_local_count() -> None:
    limiter = Limiter(3)
    assert limiter.try_acquire(2) and not limiter.try_acquire(2) and limiter.try_acquire(1)
    assert limiter.in_flight == 3 and not limiter.try_acquire(1)
    assert not limiter.idle.is_set()
    limiter.release(2)
    limiter.release(1)
    assert limiter.in_flight == 0 and limiter.idle.is_set()
    unlimited = Limiter(0)
    assert all(unlimited.try_acquire(100) for _ in range(5)) and unlimited.in_flight == 500


def test_the_shared_count_is_the_containers() -> None:
    board = Board.create(workers=2, replicas=1, sessions=0)
    mine, supervisor = SharedLimiter(board, 0, 4), SharedLimiter(board, None, 4)
    got = boardproc.run(
        board,
        """
        from neuronserve.front.limiter import SharedLimiter
        other = SharedLimiter(board, 1, 4)
        out([other.try_acquire(3), other.try_acquire(2), other.in_flight])
        """,
    )
    assert got == [[True, False, 3]]
    assert not mine.try_acquire(2) and mine.try_acquire(1)  # the other process's 3 count here
    assert supervisor.in_flight == 4 and supervisor.locked_total() == 4
    with pytest.raises(RuntimeError):
        supervisor.try_acquire(1)
    mine.release(1)
    board.forget_worker(1)  # the other process is gone: its weight with it
    assert supervisor.in_flight == 0
    asyncio.run(asyncio.wait_for(supervisor.wait_idle(), 1))


def test_never_past_the_limit_under_contention() -> None:
    """Four processes take and give back 1-3 sequences as fast as they can for a second, each checking
    the container's count (under the lock) right after every admission: it never passes the limit, the
    limit is reached, and refusals happen."""
    limit, workers = 5, 4
    board = Board.create(workers=workers, replicas=1, sessions=0)
    code = f"LIMIT = {limit}\n" + dedent(
        """
        import random, time
        from neuronserve.front.limiter import SharedLimiter
        me = SharedLimiter(board, int(sys.stdin.readline()), LIMIT)
        peak = refused = admitted = 0
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            w = random.randint(1, 3)
            if me.try_acquire(w):
                admitted += 1
                peak = max(peak, me.locked_total())
                me.release(w)
            else:
                refused += 1
        out([peak, refused, admitted])
        """
    )
    procs = [boardproc.start(board, code) for _ in range(workers)]
    for i, proc in enumerate(procs):
        assert proc.stdin is not None
        proc.stdin.write(f"{i}\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, stdout
        results.append([int(x) for x in stdout.strip()[1:-1].split(",")])
    assert max(peak for peak, _, _ in results) == limit, results
    assert sum(refused for _, refused, _ in results) > 0 and all(a > 0 for _, _, a in results)
    assert SharedLimiter(board, None, limit).in_flight == 0


def test_a_killed_holder_blocks_nobody() -> None:
    """A process killed while it holds the lock and 3 sequences: the lock is free at once, and once
    the supervisor forgets the worker its sequences are free too."""
    board = Board.create(workers=2, replicas=1, sessions=0)
    holder = boardproc.start(
        board,
        """
        from neuronserve.front.limiter import SharedLimiter
        SharedLimiter(board, 1, 4).try_acquire(3)
        board.flight_lock.__enter__()
        out("held")
        sys.stdin.readline()
        """,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == '"held"'
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    mine = SharedLimiter(board, 0, 4)
    assert mine.try_acquire(1) and not mine.try_acquire(1)
    board.forget_worker(1)
    assert mine.try_acquire(3) and mine.in_flight == 4


def test_the_gate_takes_a_requests_sequences_from_its_limiter_and_gives_them_back() -> None:
    """n=3 weighs 3 of 4; a second such request does not fit (429); both end with nothing taken."""

    async def run() -> None:
        async with running_front(max_concurrency=4, engine_delay_s=0.3) as front:
            body = {"prompt": "hi", "max_tokens": 1, "n": 3}
            first = asyncio.ensure_future(front.client.post("/v1/completions", json=body))
            while front.gate.limiter.in_flight < 3:
                await asyncio.sleep(0.01)
            second = await front.client.post("/v1/completions", json=body)
            assert second.status_code == 429 and second.headers["retry-after"] == "1"
            assert "only 1 of 4 are free" in second.json()["error"]["message"]
            assert (await first).status_code == 200
            assert front.gate.limiter.in_flight == 0 and front.gate.in_flight == 0

    asyncio.run(run())
