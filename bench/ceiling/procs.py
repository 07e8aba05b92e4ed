"""CPU time of the front and of the engine, read from /proc (no psutil: the base install has none).

The front is the `neuronserve serve` process and every descendant that is not an engine (its workers,
once NEURONSERVE_FRONT_WORKERS exists) and not an engine's watchdog; an engine is every process in the
process group of a `vllm.entrypoints.openai.api_server` child (engine/process.py starts each engine
in a session of its own, so its forks share its group). CPU is user + system time (proc(5),
/proc/<pid>/stat fields 14 and 15), in clock ticks of 1/SC_CLK_TCK s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
ENGINE_MODULE = b"vllm.entrypoints.openai.api_server"
WATCHDOG_MARK = b"killpg"  # engine/process.py's watchdog: `python -S -E -c "...os.killpg..."`


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgrp: int
    cpu_s: float


def _read(pid: int) -> Proc | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces
    ppid, pgrp = int(fields[1]), int(fields[2])
    cpu = (int(fields[11]) + int(fields[12])) * TICK_S
    return Proc(pid, ppid, pgrp, cpu)


def cpu_of(pid: int) -> float:
    """CPU seconds so far of one process (0.0 once it is gone)."""
    proc = _read(pid)
    return proc.cpu_s if proc is not None else 0.0


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""


def snapshot() -> dict[int, Proc]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdecimal():
            proc = _read(int(name))
            if proc is not None:
                out[proc.pid] = proc
    return out


def descendants(root: int, procs: dict[int, Proc]) -> set[int]:
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


@dataclass(frozen=True)
class Split:
    """The pids of one serve, by role."""

    front: frozenset[int]
    engine: frozenset[int]

    @property
    def engine_pid(self) -> int | None:
        mains = [p for p in self.engine if ENGINE_MODULE in cmdline(p)]
        return min(mains) if mains else None


def split(serve_pid: int) -> Split:
    procs = snapshot()
    family = descendants(serve_pid, procs) | {serve_pid}
    groups = {p for p in family if procs[p].pgrp == p and ENGINE_MODULE in cmdline(p)}
    engine = {p.pid for p in procs.values() if p.pgrp in groups}
    front = {p for p in family - engine if WATCHDOG_MARK not in cmdline(p)}
    return Split(frozenset(front), frozenset(engine))


@dataclass(frozen=True)
class Cpu:
    front_s: float
    engine_s: float


def cpu(serve_pid: int) -> Cpu:
    """CPU seconds so far of the serve's front and engine processes (found again each time: a
    worker or an engine forked since the last reading is counted; one that exited is not)."""
    roles = split(serve_pid)
    procs = snapshot()
    front = sum(procs[p].cpu_s for p in roles.front if p in procs)
    engine = sum(procs[p].cpu_s for p in roles.engine if p in procs)
    return Cpu(front, engine)


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (proc(5), the `cpu` line of /proc/stat: user, nice,
    system, irq, softirq, steal); less the benchmark's own processes, what other work took."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) * TICK_S


def load_average() -> tuple[float, float, float]:
    one, five, fifteen = os.getloadavg()
    return one, five, fifteen
