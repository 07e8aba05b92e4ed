"""The engine's process tree with real processes: the engine (and what it forked) dies with a SIGKILLed
front, and the front sweeps the group of an engine that exited on its own."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from neuronserve.engine import EngineProcess

REPO = Path(__file__).resolve().parents[3]
# An "engine" that forks a worker of its own (as vLLM forks its EngineCore), then sleeps.
ENGINE = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "time.sleep(120)\n"
)
# The front: starts the engine through EngineProcess, prints its pid, then waits to be killed.
FRONT = f"""
import io, os, sys, time
from neuronserve.engine import EngineProcess
argv = (sys.executable, "-c", {ENGINE!r})
engine = EngineProcess(argv, {{}}, sys.argv[1], dict(os.environ), out=io.StringIO())
engine.start()
print(engine.pid, flush=True)
time.sleep(120)
"""


def _group(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(entry.name))
    return out


def _wait(predicate: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_engine_and_its_worker_die_with_a_sigkilled_front(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    front = subprocess.Popen(
        [sys.executable, "-c", FRONT, str(tmp_path)], env=env, stdout=subprocess.PIPE, text=True
    )
    engine_pid = 0
    try:
        assert front.stdout is not None
        engine_pid = int(front.stdout.readline())
        assert _wait(lambda: len(_group(engine_pid)) == 2, 10), "engine and its worker never both ran"
        front.kill()  # SIGKILL: no handler, no finally, no atexit runs in the front
        front.wait(timeout=5)
        assert _wait(lambda: not _group(engine_pid), 10), f"outlived the front: {_group(engine_pid)}"
    finally:
        front.kill()
        if engine_pid:
            for pid in _group(engine_pid):
                os.kill(pid, signal.SIGKILL)


def test_a_dead_engines_group_is_swept_when_its_exit_is_seen(tmp_path: Path) -> None:
    """The main process exits, its worker would stay: the first returncode() that sees the exit kills it."""
    script = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "sys.exit(3)\n"
    )
    engine = EngineProcess(
        (sys.executable, "-c", script), {}, str(tmp_path), dict(os.environ), out=io.StringIO()
    )
    engine.start()
    pid = engine.pid
    assert pid is not None
    try:
        assert _wait(lambda: engine.returncode() is not None, 10)
        assert engine.returncode() == 3
        assert _wait(lambda: not _group(pid), 5), f"the worker outlived its engine: {_group(pid)}"
    finally:
        engine.stop(grace_s=0)


def test_an_orderly_stop_dismisses_the_watchdog(tmp_path: Path) -> None:
    engine = EngineProcess(
        (sys.executable, "-c", "import time; time.sleep(60)"),
        {},
        str(tmp_path),
        dict(os.environ),
        out=io.StringIO(),
    )
    engine.start()
    watchdog = engine.watchdog_pid
    assert watchdog is not None and engine.pid is not None
    assert watchdog not in _group(engine.pid)  # its own session: a signal to the group spares it
    engine.stop(grace_s=1.0)
    assert not Path(f"/proc/{watchdog}").exists() or _state(watchdog) == "Z"


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2 :].split()[0]
