"""Keep the front server off the CPU cores the engine pinned its compute threads to.

Why: vLLM on the CPU binds its OpenMP compute threads to fixed cores and leaves the rest (by default
the last core) for its API process. The front server, if the kernel schedules it on a compute core,
preempts a thread the whole forward pass waits on, and every token of every request pays for it:
measured on the 2-core development machine with SmolLM2, 16-token requests through the front took
1.7 % longer than direct engine requests while unpinned, and were even with them once the front sat
on the free core (docs/PERFORMANCE.md, "Serving overhead").

How: once the engine is READY, read which CPUs its threads are allowed on (/proc/<pid>/task/*/status
for every process in the engine's process group). Threads allowed on fewer CPUs than we are were
pinned by the engine: their CPUs are the ones to avoid. The front's own threads are then restricted
to what is left. An engine that pins nothing (the Neuron image: its compute runs on NeuronCores) or
that pins every CPU leaves the front as it was, so this is a no-op wherever it cannot help.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable


def parse_cpu_list(text: str) -> set[int]:
    """`0-3,6` -> {0, 1, 2, 3, 6} (the kernel's Cpus_allowed_list format); junk yields an empty set."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            cpus.update(range(int(lo), int(hi) + 1) if dash else [int(lo)])
        except ValueError:
            return set()
    return cpus


def format_cpus(cpus: Iterable[int]) -> str:
    """{0, 1, 2, 5} -> "0-2,5" (the same format, for logs)."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and runs[-1][1] == cpu - 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in runs)


def _allowed(status_path: str) -> set[int] | None:
    try:
        with open(status_path, encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Cpus_allowed_list:"):
                    return parse_cpu_list(line.split(":", 1)[1])
    except OSError:
        return None  # the thread ended while we looked
    return None


def _group_pids(pgid: int, proc: str) -> list[int]:
    """Processes whose process group is `pgid` (the engine runs in its own session and group)."""
    pids: list[int] = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        # the command name (field 2) may hold spaces and parentheses: fields after its last ')'
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid):
            pids.append(int(name))
    return pids


def engine_pinned_cpus(pgid: int, allowed: set[int], proc: str = "/proc") -> set[int]:
    """CPUs that some thread of the engine's process group is pinned to (a strict subset of `allowed`)."""
    pinned: set[int] = set()
    for pid in _group_pids(pgid, proc):
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"{proc}/{pid}/task"):
                cpus = _allowed(f"{proc}/{pid}/task/{tid}/status")
                if cpus and cpus < allowed:
                    pinned |= cpus
    return pinned


def front_cpus(allowed: Iterable[int], engine_pinned: Iterable[int]) -> set[int] | None:
    """Where the front should run: `allowed` less the engine's pinned CPUs; None = leave it alone."""
    allowed_set, pinned = set(allowed), set(engine_pinned)
    free = allowed_set - pinned
    if not pinned or not free or free == allowed_set:
        return None
    return free


def pin_this_process(cpus: set[int], proc: str = "/proc") -> int:
    """Restrict every thread of this process to `cpus` (threads made later inherit it); returns how many."""
    done = 0
    for tid in os.listdir(f"{proc}/self/task"):
        with contextlib.suppress(OSError):  # a thread may end while we go
            os.sched_setaffinity(int(tid), cpus)
            done += 1
    return done


def keep_front_off_engine_cpus(engine_pgid: int) -> tuple[set[int], set[int]] | None:
    """Pin the front to the CPUs the engine left free; returns (front CPUs, engine CPUs) or None."""
    allowed = os.sched_getaffinity(0)
    pinned = engine_pinned_cpus(engine_pgid, allowed)
    target = front_cpus(allowed, pinned)
    if target is None:
        return None
    pin_this_process(target)
    return target, pinned
