"""Replica pools of tiny sleeping processes and a fake clock, for the supervision and routing tests."""

from __future__ import annotations

import sys

from neuronserve.types import LaunchPlan, ModelSpec, ReplicaSpec, ServeOptions

SLEEPER = (sys.executable, "-c", "import time; time.sleep(60)", "--port", "0")


def make_plan(n: int, tmp: str, min_ready: int | None = None) -> LaunchPlan:
    specs = tuple(ReplicaSpec(i, SLEEPER, {}, str(i), 9000 + i) for i in range(n))
    return LaunchPlan(
        device="cpu",
        argv=SLEEPER,
        env={},
        model=ModelSpec("local", "/m", "/m"),
        neuron_override=None,
        cache_key=None,
        warnings=(),
        work_dir=tmp,
        serve=ServeOptions(min_ready_replicas=min_ready),
        replicas=specs,
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
