"""The engine runs below the front: its process nice and its session's autogroup nice are raised."""

from __future__ import annotations

import io
import os
import sys
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
