"""How many front workers `auto` means, and the port they share."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from neuronserve.serve.workers import (
    REPLICA_EVENTS_PER_S,
    REPLICA_REQUESTS_PER_S,
    WORKER_EVENTS_PER_S,
    WORKER_REQUESTS_PER_S,
    reuseport_sockets,
    usable_cpus,
    worker_count,
)


def _cgroup(tmp_path: Path, v2: str | None = None, v1: tuple[str, str] | None = None) -> Path:
    tmp_path.mkdir()
    if v2 is not None:
        (tmp_path / "cpu.max").write_text(v2)
    if v1 is not None:
        (tmp_path / "cpu").mkdir()
        (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text(v1[0])
        (tmp_path / "cpu" / "cpu.cfs_period_us").write_text(v1[1])
    return tmp_path


def test_usable_cpus_is_the_affinity_lowered_to_the_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)))
    assert usable_cpus(_cgroup(tmp_path / "none")) == 8  # no cgroup files: the affinity
    assert usable_cpus(_cgroup(tmp_path / "a", v2="max 100000\n")) == 8
    assert usable_cpus(_cgroup(tmp_path / "b", v2="250000 100000\n")) == 3  # 2.5 CPUs: 3 workers fit
    assert usable_cpus(_cgroup(tmp_path / "c", v2="50000 100000\n")) == 1
    assert usable_cpus(_cgroup(tmp_path / "d", v2="2000000 100000\n")) == 8  # quota above the affinity
    assert usable_cpus(_cgroup(tmp_path / "e", v1=("400000", "100000"))) == 4
    assert usable_cpus(_cgroup(tmp_path / "f", v1=("-1", "100000"))) == 8
    assert usable_cpus(_cgroup(tmp_path / "g", v2="garbage")) == 8


def test_auto_sizes_the_workers_to_what_the_replicas_produce_within_the_cpus() -> None:
    asked: list[bool] = []

    def cpus() -> int:
        asked.append(True)
        return 4

    assert worker_count(3, 8, cpus) == (3, None) and not asked  # as set: the CPUs are not even read
    # replicas one worker is sized for: the tighter of the two measures
    per_worker = min(
        WORKER_EVENTS_PER_S // REPLICA_EVENTS_PER_S, WORKER_REQUESTS_PER_S // REPLICA_REQUESTS_PER_S
    )
    assert per_worker >= 2
    assert worker_count(None, 1, cpus)[0] == 1
    assert worker_count(None, per_worker, cpus)[0] == 1
    assert worker_count(None, per_worker + 1, cpus)[0] == 2
    count, line = worker_count(None, 64, cpus)
    assert count == 4 and line is not None  # more are needed than there are CPUs: the CPUs
    assert line.startswith("NEURONSERVE_FRONT_WORKERS=auto chose 4 front process(es)"), line
    assert f"64 replica(s) ask at most {64 * REPLICA_EVENTS_PER_S} stream events/s" in line, line
    assert f"and {64 * REPLICA_REQUESTS_PER_S} requests/s" in line and "4 CPU(s) usable" in line, line


def test_the_sockets_share_one_port_and_a_held_port_is_refused() -> None:
    socks = reuseport_sockets("127.0.0.1", 0, 3)
    try:
        ports = {s.getsockname()[1] for s in socks}
        assert len(ports) == 1
        port = ports.pop()
        for _ in range(6):  # every connection is accepted (into one of the backlogs) at once
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
        with pytest.raises(OSError):  # the port is ours: a second server does not join it
            reuseport_sockets("127.0.0.1", port, 2)
    finally:
        for s in socks:
            s.close()
    with socket.socket() as plain:  # held by a plain (not SO_REUSEPORT) socket
        plain.bind(("127.0.0.1", 0))
        plain.listen()
        with pytest.raises(OSError):
            reuseport_sockets("127.0.0.1", plain.getsockname()[1], 2)


def test_metrics_directories_of_gone_servers_are_removed(tmp_path: Path) -> None:
    import subprocess

    from neuronserve.serve.workers import METRICS_PREFIX, _remove_stale_metrics

    dead = subprocess.Popen(["true"])
    dead.wait()  # reaped: its pid runs nothing now
    stale = tmp_path / f"{METRICS_PREFIX}{dead.pid}-abc"
    live = tmp_path / f"{METRICS_PREFIX}{os.getpid()}-xyz"
    other = tmp_path / f"{METRICS_PREFIX}notapid-q"
    for d in (stale, live, other):
        d.mkdir()
        (d / "counter_1.db").write_bytes(b"x")
    _remove_stale_metrics(tmp_path)
    assert not stale.exists() and live.exists() and other.exists()
