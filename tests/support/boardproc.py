"""A second process on a board (front/board.py): runs Python code with the board's descriptor
inherited, as a front worker does, so the tests of shared state cross a real process boundary."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

from tests.support.server import REPO

from neuronserve.front.board import Board

PRELUDE = """
import json, sys
from neuronserve.front.board import Board
fd, workers, replicas, sessions = (int(x) for x in sys.argv[1:5])
board = Board.attach(fd, workers, replicas, sessions)
def out(value):
    print(json.dumps(value), flush=True)
"""


def start(board: Board, code: str) -> subprocess.Popen[str]:
    """`code` in a child process where `board` is the same board (`out(value)` prints a JSON line)."""
    args = [str(board.fd), str(board.workers), str(board.replicas), str(board.sessions)]
    return subprocess.Popen(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code), *args],
        pass_fds=(board.fd,),
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(REPO / "src") + ":" + str(REPO)},
    )


def run(board: Board, code: str, timeout_s: float = 60) -> list[Any]:
    """Run `code` to its end; the JSON values it printed."""
    proc = start(board, code)
    stdout, _ = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, stdout
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]
