"""The engine runs below the front: its process nice and its session's autogroup nice are raised."""

from __future__ import annotations

import io
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from neuronserve.engine import EngineProcess
from neuronserve.types import LaunchPlan, ModelSpec, ServeOptions


def _plan(tmp_path: Path, nice: int) -> LaunchPlan:
    return LaunchPlan(
        device="cpu",
        argv=(sys.executable, "-c", "import time; time.sleep(30)"),
        env={},
        model=ModelSpec(source="local", uri="/m", local_path="/m"),
        neuron_override=None,
        cache_key=None,
        warnings=(),
        work_dir=str(tmp_path),
        serve=replace(ServeOptions(), engine_nice=nice),
    )


def _nice_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[16])  # field 19: nice


@pytest.mark.parametrize("nice", [0, 10])
def test_engine_nice_and_autogroup(tmp_path: Path, nice: int) -> None:
    plan = _plan(tmp_path, nice)
    engine = EngineProcess(
        plan.argv, plan.env, plan.work_dir, dict(os.environ), out=io.StringIO(), nice=plan.serve.engine_nice
    )
    engine.start()
    try:
        pid = engine.pid
        assert pid is not None
        assert _nice_of(pid) == os.getpriority(os.PRIO_PROCESS, 0) + nice
        group = Path(f"/proc/{pid}/autogroup")
        if group.exists():  # kernels with sched_autogroup: the session's group is niced too
            assert group.read_text().split()[-1] == str(nice)
    finally:
        engine.stop(grace_s=1.0)


# An engine that prints a line, then on SIGTERM writes vLLM 0.32's shutdown noise and exits with the
# code it is given (the noise: its output handler's EngineDeadError traceback, async_llm.py).
_STOPPING_ENGINE = (
    "import signal, sys, time\n"
    "def stop(*_):\n"
    "    print('ERROR AsyncLLM output_handler failed.', flush=True)\n"
    "    print('Traceback (most recent call last):', flush=True)\n"
    "    print('vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.', flush=True)\n"
    "    sys.exit(int(sys.argv[1]))\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "print('serving', flush=True)\n"
    "time.sleep(30)\n"
)


@pytest.mark.parametrize(("code", "shown"), [(0, False), (3, True)])
def test_an_orderly_stop_shows_the_engines_shutdown_lines_only_when_it_fails(
    tmp_path: Path, code: int, shown: bool
) -> None:
    """A clean Ctrl-C / SIGTERM prints no traceback (the lines stay in the tail); a stop that fails
    shows what the engine said while stopping."""
    out = io.StringIO()
    argv = (sys.executable, "-c", _STOPPING_ENGINE, str(code))
    engine = EngineProcess(argv, {}, str(tmp_path), dict(os.environ), out=out)
    engine.start()
    deadline = time.monotonic() + 10
    while "serving" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "serving" in out.getvalue()  # lines before the stop are printed as they come
    assert engine.stop(grace_s=5.0) == code
    assert ("EngineDeadError" in out.getvalue()) is shown
    assert any("EngineDeadError" in line for line in engine.last_lines())  # kept either way
