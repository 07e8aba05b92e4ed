"""The probe answers in shared memory (serve/probeboard.py): what the front publishes is what the door's
process reads, whole, from another process; stale or missing answers are none."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from neuronserve.serve import probeboard
from neuronserve.serve.probeboard import ANSWERS, SIZE, ProbeBoard

ANSWERS_A = [
    b"HTTP/1.1 200 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n",
    b"L" * 300,
    b"C" * 301,
]


def test_published_answers_are_read_back_by_path_and_close() -> None:
    board = ProbeBoard.create()
    try:
        assert board.read("/ping", False)[0] is None  # nothing published yet
        assert board.publish(ANSWERS_A, front_connections=7)
        for (path, close), expected in zip(ANSWERS, ANSWERS_A, strict=True):
            assert board.read(path, close)[0] == expected
        assert board.front_connections() == 7
        board.set_door_held(3)
        assert board.door_held() == 3
    finally:
        board.close()


def test_answers_too_large_are_not_published_and_the_last_ones_stay() -> None:
    board = ProbeBoard.create()
    try:
        assert board.publish(ANSWERS_A, 1)
        assert not board.publish([b"x" * SIZE, b"", b"", b""], 2)
        assert board.read("/live", True)[0] == ANSWERS_A[3] and board.front_connections() == 1
    finally:
        board.close()


def test_answers_are_given_only_for_the_basis_they_were_built_from() -> None:
    """Published with the watched bytes they followed: asked with other bytes (the supervisor changed
    them since), there is no answer, and the front's loop answers from the state as it is."""
    board = ProbeBoard.create()
    try:
        assert board.publish(ANSWERS_A, 0, basis=b"\x04\x01\x01" + bytes(13))
        assert board.read("/ping", False, b"\x04\x01\x01" + bytes(13))[0] == ANSWERS_A[0]
        assert board.read("/ping", False, b"\x04\x01\x00" + bytes(13))[0] is None  # the engine died
        assert board.read("/ping", False)[0] is None  # no basis is not the published one either
        assert board.publish(ANSWERS_A, 0)  # none: a state of the process's own
        assert board.read("/live", True)[0] == ANSWERS_A[3]
        assert not board.publish(ANSWERS_A, 0, basis=bytes(probeboard.BASIS_BYTES + 1))
    finally:
        board.close()


def test_answers_older_than_stale_s_are_none(monkeypatch: pytest.MonkeyPatch) -> None:
    board = ProbeBoard.create()
    now = [1000.0]
    monkeypatch.setattr(probeboard.time, "monotonic", lambda: now[0])
    try:
        board.publish(ANSWERS_A, 0)
        now[0] += probeboard.STALE_S - 0.1
        assert board.read("/ping", False)[0] == ANSWERS_A[0]
        now[0] += 0.2
        assert board.read("/ping", False)[0] is None  # the front stopped publishing: the loop answers
    finally:
        board.close()


READER = """
import sys
from neuronserve.serve.probeboard import ProbeBoard
board = ProbeBoard(int(sys.argv[1]))
allowed = {sys.argv[2].encode(), sys.argv[3].encode()}
seen = bad = 0
for _ in range(20000):
    got = board.read("/live", False)[0]
    if got is not None:
        seen += 1
        bad += got not in allowed
print(seen, bad)
"""


def test_a_reader_in_another_process_never_sees_a_torn_answer() -> None:
    """Two answer sets of different lengths published in turn while another process reads: every answer
    it reads is one of them, whole (a length from one set with the other's bytes would not be)."""
    board = ProbeBoard.create()
    short, long = "s" * 10, "l" * 500
    try:
        board.publish([b"p", b"p", short.encode(), b"c"], 0)
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, str(board.fd), short, long],
            pass_fds=(board.fd,),
            stdout=subprocess.PIPE,
            text=True,
        )
        flip = False
        while reader.poll() is None:
            board.publish([b"p" * (1 + flip), b"p", (long if flip else short).encode(), b"c"], 0)
            flip = not flip
            time.sleep(0)
        seen, bad = map(int, reader.stdout.read().split())  # type: ignore[union-attr]
        assert reader.returncode == 0 and seen > 1000 and bad == 0
    finally:
        board.close()
