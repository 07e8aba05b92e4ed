"""Engine exits seen through pidfds (serve/engineexits.py), with real processes: a running one is not
gone, a killed one is (before anyone reaps it), a pid that names no process is, and a process seen
exited stays exited without being followed again."""

from __future__ import annotations

import subprocess
import sys
import time

from neuronserve.serve.engineexits import EngineExits


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_running_process_is_not_gone_and_a_killed_one_is_before_it_is_reaped() -> None:
    alive, victim = _sleeper(), _sleeper()
    exits = EngineExits()
    try:
        assert not exits.gone([alive.pid, victim.pid])
        assert len(exits.fds()) == 2
        victim.kill()
        deadline = time.monotonic() + 5.0  # the kill is delivered asynchronously; nobody reaps it
        while not exits.gone([alive.pid, victim.pid]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert exits.gone([alive.pid, victim.pid])
        assert not exits.gone([alive.pid])  # the dead one is not among these
        assert exits.fds() == exits.fds()[:1]  # only the live one is followed now
    finally:
        exits.close()
        for p in (alive, victim):
            p.kill()
            p.wait()


def test_a_pid_that_names_no_process_is_gone() -> None:
    done = _sleeper()
    done.kill()
    done.wait()  # reaped: its pid names nothing now
    exits = EngineExits()
    assert exits.gone([done.pid])
    assert exits.fds() == []


def test_the_publishers_wait_ends_when_a_followed_process_exits() -> None:
    import select

    victim = _sleeper()
    exits = EngineExits()
    try:
        exits.follow([victim.pid])
        assert select.select(exits.fds(), [], [], 0)[0] == []
        victim.kill()
        readable, _, _ = select.select(exits.fds(), [], [], 5.0)
        assert readable
        exits.exited(readable)
        assert exits.fds() == [] and exits.gone([victim.pid])
    finally:
        exits.close()
        victim.kill()
        victim.wait()
