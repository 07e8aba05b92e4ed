"""A stuck front worker is replaced (serve/workers.py), tested from outside: the real `neuronserve
serve` with two front workers before the stand-in engine (tests/support/standin_server.py), one worker
stopped with SIGSTOP. Its heartbeat stops; after NEURONSERVE_FRONT_WORKER_TIMEOUT_S the supervisor
kills it and starts another on the same listening socket, so the connections the kernel queued on
that socket meanwhile are answered, and so is every later one. Before the heartbeat, a stopped worker
was never replaced: its socket kept 1/N of the new connections, which waited forever.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path

import pytest
from tests.support.standin_server import StandinServer, standin_server
from tests.support.workers import alive, fresh, spread, wait_for, worker_pids, workers_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TIMEOUT_S = 2.0
POLL_SLACK_S = 1.0  # the supervisor looks every 0.1 s; the kill and the wait for it take a little more
PLAIN = {"model": "standin", "prompt": "hello", "max_tokens": 2}


def _restarts(server: StandinServer) -> dict[str, float]:
    text = fresh(server, "GET", "/metrics").text
    found = re.findall(r'^neuronserve_front_worker_restarts_total\{reason="(\w+)"\} (\S+)$', text, re.M)
    return {reason: float(value) for reason, value in found}


def _started_at(server: StandinServer, worker: int, pid: int) -> bool:
    return f"front worker {worker} started: pid " in server.log() and worker_pids(server)[worker] != pid


def test_a_stopped_worker_is_replaced_within_the_timeout_and_every_later_request_is_answered(
    tmp_path: Path,
) -> None:
    env = {"NEURONSERVE_FRONT_WORKERS": "2", "NEURONSERVE_FRONT_WORKER_TIMEOUT_S": f"{TIMEOUT_S:g}"}
    with standin_server(tmp_path, **env) as server:
        assert _restarts(server) == {"exited": 0.0, "stuck": 0.0}
        victim = worker_pids(server)[0]
        stopped = time.monotonic()
        os.kill(victim, signal.SIGSTOP)
        try:
            # New connections while it is stopped: those the kernel hashes to its socket wait in the
            # backlog for the replacement; none is lost.
            during = [fresh(server, "GET", "/ping", timeout=30).status_code for _ in range(6)]
            wait_for(lambda: _started_at(server, 0, victim), 15, "the replacement")
            took = time.monotonic() - stopped
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGCONT)
        assert during == [200] * 6
        assert took < TIMEOUT_S + POLL_SLACK_S + 2.0, took  # + the test's own polling and pings
        wait_for(lambda: not alive(victim), 5, "the stopped worker to be gone")
        log = server.log()
        line = next(x for x in log.splitlines() if f"front worker 0 (pid {victim})" in x)
        assert "has not reported for" in line and "NEURONSERVE_FRONT_WORKER_TIMEOUT_S=2" in line, line
        assert "killed, restarting it" in line, line
        # every later request on a fresh connection is answered, by both workers
        pings = spread(server, "GET", "/ping", 12)
        assert [r.status_code for r in pings] == [200] * len(pings)
        assert workers_of(pings) == {"0", "1"}
        posts = spread(server, "POST", "/v1/completions", 6, json=PLAIN)
        assert [r.status_code for r in posts] == [200] * len(posts)
        assert _restarts(server) == {"exited": 0.0, "stuck": 1.0}

        # a worker that exits is counted under its own reason
        other = worker_pids(server)[1]
        os.kill(other, signal.SIGKILL)
        wait_for(lambda: _started_at(server, 1, other), 15, "worker 1's replacement")
        assert f"front worker 1 exited with code -9: restarting it (pid {other})" in server.log()
        wait_for(lambda: _restarts(server) == {"exited": 1.0, "stuck": 1.0}, 10, "the counter")
        assert [r.status_code for r in spread(server, "GET", "/ping", 6)] == [200] * 6
