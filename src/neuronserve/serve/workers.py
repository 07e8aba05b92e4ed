"""Front workers (NEURONSERVE_FRONT_WORKERS > 1): several front processes on one port, one supervisor.

Why processes: one Python front tops out at one core (docs/PERFORMANCE.md, "Front ceiling"), and with
data parallel N engines can want more. `auto` (the default) sizes them from the front's measured
capacity per worker and what a Neuron replica can produce at most (`worker_count`). The supervisor (this
process: staging, the engines, publishing, the phase, signals) stays one; it serves no HTTP itself and
starts N workers, each a fresh interpreter (`python -m neuronserve.serve.worker`, not a fork of a
process that has threads) running the whole route table.

- The port: the supervisor binds N listening sockets with SO_REUSEPORT before anything else (the
  kernel accepts connections into their backlogs at once, as with one process) and keeps them; worker
  i serves socket i. A worker that dies leaves its socket open in the supervisor, so the connections
  the kernel queues on it wait for its replacement instead of being reset.
- Shared state: one board (front/board.py), a memfd every worker inherits: the container's in-flight
  count (the limits), the session ledger, the phase and the rest of the server state, each replica's
  state. /metrics merges every process's series (prometheus_client multiprocess mode) from a private
  directory made here and removed at stop.
- Stopping: a worker stops when its stdin closes (the supervisor closes it after the drain, or dies:
  a worker never outlives its supervisor). Workers ignore SIGTERM and SIGINT, which mean "drain" and
  are the supervisor's to act on.
- A worker that dies is restarted at once (its in-flight requests are lost, and counted out of the
  limit); more than NEURONSERVE_MAX_RESTARTS deaths of one worker within NEURONSERVE_RESTART_WINDOW_S
  end the server (exit 1), as a crash-looping engine replica does.
- A worker that is stuck is replaced too, as gunicorn's arbiter does with `--timeout`: each worker's
  event loop stamps its heartbeat on the board every BEAT_S (serve/worker.py); one whose heartbeat is
  older than NEURONSERVE_FRONT_WORKER_TIMEOUT_S (a blocked or spinning loop, a SIGSTOP) is killed
  with SIGKILL (which a stopped process also takes) and replaced as a dead one is. Without this,
  SO_REUSEPORT kept handing it 1/N of the new connections, and /ping, answered by the other workers,
  said 200. Each replacement is logged with the pid and why, and counted in
  neuronserve_front_worker_restarts_total{reason="exited"|"stuck"}.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from neuronserve.config.table import VARS
from neuronserve.front.board import Board
from neuronserve.redact import is_secret_name
from neuronserve.types import LaunchPlan, RequestSupport, ServeOptions

log = logging.getLogger("neuronserve.serve")

METRICS_PREFIX = "neuronserve-metrics-"
STOP_WAIT_S = 10.0  # a worker's own graceful stop is 3 s (uvicorn's), then it is killed
CGROUP = Path("/sys/fs/cgroup")
BEAT_S = 0.5  # a worker stamps its heartbeat this often (serve/worker.py)
START_S = 60.0  # a new worker's first heartbeat may take this long (its imports), or the timeout if longer
# Sizing `auto` (docs/PERFORMANCE.md, "Front capacity per worker"): what one worker served with a core
# of its own in bench/bench_ceiling.py, the worst of the runs on the shared 2-vCPU machine (CPU per unit
# inflated by the other work there: a quiet machine served 3-5x more), against the most one Neuron
# replica can ask of the front: 64 sequences decoding at a step every 13 ms (12x the published 409
# tokens/s of a TP 8 replica of Llama-3.1-8B on inf2), each non-streamed request holding them 100 ms.
WORKER_EVENTS_PER_S = 20_000  # stream events per second (TGI reframed, 50 us each)
WORKER_REQUESTS_PER_S = 1_700  # non-streamed requests per second (590 us each)
REPLICA_EVENTS_PER_S = 5_000
REPLICA_REQUESTS_PER_S = 640


@dataclass(frozen=True)
class WorkerConfig:
    """What worker `index` needs from the plan (pickled to its stdin: no secrets in it)."""

    index: int
    workers: int
    opts: ServeOptions
    support: RequestSupport
    base_urls: tuple[str, ...]
    device: str
    stack: dict[str, str]  # the plan's stack lane
    model_dtype: str
    log_format: str
    sock_fd: int
    board_fd: int
    sessions: int  # slots of the session ledger (0 without sticky sessions)
    metrics_dir: str


def usable_cpus(root: Path = CGROUP) -> int:
    """CPUs this process may run on: its affinity, lowered to the cgroup's CPU quota when it has one
    (cgroup v2 `cpu.max`, else v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`)."""
    count = len(os.sched_getaffinity(0))
    quota = _cgroup_quota(root)
    return max(1, min(count, math.ceil(quota))) if quota else count


def _cgroup_quota(root: Path) -> float | None:
    try:
        text = (root / "cpu.max").read_text().split()
        if len(text) == 2 and text[0] != "max":
            return int(text[0]) / int(text[1])
        return None
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def worker_count(
    configured: int | None, replicas: int, cpus: Callable[[], int] = usable_cpus
) -> tuple[int, str | None]:
    """NEURONSERVE_FRONT_WORKERS: as set, or auto (None): enough workers for the most `replicas` replicas
    can ask of the front, in stream events and in requests (the constants above), at most `cpus()`
    (only then asked). With auto, the line that says why (the caller logs it after the start's summary,
    which stays the first line a person reads)."""
    if configured is not None:
        return configured, None
    events, requests = replicas * REPLICA_EVENTS_PER_S, replicas * REPLICA_REQUESTS_PER_S
    needed = max(math.ceil(events / WORKER_EVENTS_PER_S), math.ceil(requests / WORKER_REQUESTS_PER_S))
    usable = cpus()
    count = max(1, min(needed, usable))
    return count, (
        f"NEURONSERVE_FRONT_WORKERS=auto chose {count} front process(es): {replicas} replica(s) ask at most "
        f"{events} stream events/s and {requests} requests/s; one process is sized for "
        f"{WORKER_EVENTS_PER_S} and {WORKER_REQUESTS_PER_S} (docs/PERFORMANCE.md) -> {needed} needed; "
        f"{usable} CPU(s) usable"
    )


def reuseport_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one port (SO_REUSEPORT). A plain bind first: if anything else holds
    the port, the start fails as it does with one process, instead of silently sharing the port with
    another server's SO_REUSEPORT socket."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
        port = probe.getsockname()[1]  # port 0: the one the kernel chose, for every worker
    socks = []
    for _ in range(count):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(2048)
        socks.append(sock)
    return socks


class Workers:
    """The supervisor's handle on its front workers: start, poll (restart the dead), stop."""

    def __init__(
        self, plan: LaunchPlan, environ: Mapping[str, str], socks: list[socket.socket], log_format: str
    ) -> None:
        opts = plan.serve
        self.socks = socks
        self.count = len(socks)
        self.sessions = opts.max_sessions if opts.sticky_sessions else 0
        self.board = Board.create(self.count, len(plan.replicas), self.sessions)
        _remove_stale_metrics(Path(tempfile.gettempdir()))
        # 0700, ours alone; named by our pid so a later start can tell it from a live server's
        self.metrics_dir = tempfile.mkdtemp(prefix=f"{METRICS_PREFIX}{os.getpid()}-")
        self.max_restarts, self.window_s = opts.max_restarts, opts.restart_window_s
        dtype = plan.argv[plan.argv.index("--dtype") + 1] if "--dtype" in plan.argv[:-1] else "auto"
        self._base = WorkerConfig(
            index=0,
            workers=self.count,
            opts=opts,
            support=plan.request_support,
            base_urls=tuple(f"http://{plan.engine_host}:{r.port}" for r in plan.replicas),
            device=plan.device,
            stack=plan.stack,
            model_dtype=dtype,
            log_format=log_format,
            sock_fd=-1,
            board_fd=self.board.fd,
            sessions=self.sessions,
            metrics_dir=self.metrics_dir,
        )
        # the workers' environment: the supervisor's without secrets (a worker needs none)
        self._env = {k: v for k, v in environ.items() if not is_secret_name(k)}
        self._env["PROMETHEUS_MULTIPROC_DIR"] = self.metrics_dir
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * self.count
        self.deaths: list[list[float]] = [[] for _ in range(self.count)]
        self.started = [0.0] * self.count  # each worker's spawn (time.monotonic)
        self.timeout_s: float = VARS["NEURONSERVE_FRONT_WORKER_TIMEOUT_S"].read(environ)
        self.on_restart: Callable[[str], object] = lambda _reason: None  # the metrics' counter

    def start(self) -> None:
        for i in range(self.count):
            self._spawn(i)

    def _spawn(self, i: int) -> None:
        sock = self.socks[i]
        config = replace(self._base, index=i, sock_fd=sock.fileno())
        self.board.set_worker_beat(i, 0.0)  # the last worker's beat is not this one's
        self.started[i] = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "neuronserve.serve.worker"],
            stdin=subprocess.PIPE,
            env=self._env,
            pass_fds=(sock.fileno(), self.board.fd),
        )
        assert proc.stdin is not None
        proc.stdin.write(pickle.dumps(config))
        proc.stdin.flush()  # kept open: its end is the worker's signal to stop
        self.procs[i] = proc
        log.info("front worker %d started: pid %d", i, proc.pid)

    def failure(self) -> str | None:
        """Replace every worker that died or is stuck; why the server must end instead, else None."""
        now = time.monotonic()
        for i, proc in enumerate(self.procs):
            if proc is None:
                continue
            reason = "exited"
            if proc.poll() is None:
                stuck = self._stuck(i, now)
                if stuck is None:
                    continue
                reason = "stuck"
                proc.kill()  # SIGKILL: a stopped process takes it too
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5.0)
                log.warning("front worker %d (pid %d) %s: killed, restarting it", i, proc.pid, stuck)
            else:
                log.warning(
                    "front worker %d exited with code %s: restarting it (pid %d)",
                    i,
                    proc.returncode,
                    proc.pid,
                )
            with contextlib.suppress(OSError):  # its pipe: no descriptor left behind per replacement
                if proc.stdin is not None:
                    proc.stdin.close()
            self.board.forget_worker(i)
            _forget_metrics(proc.pid, self.metrics_dir)
            self.deaths[i] = [t for t in self.deaths[i] if now - t < self.window_s] + [now]
            if len(self.deaths[i]) > self.max_restarts:
                self.procs[i] = None
                return (
                    f"front worker {i} exited with code {proc.returncode}, {len(self.deaths[i])} times "
                    f"within {self.window_s:g} s (NEURONSERVE_MAX_RESTARTS={self.max_restarts}, "
                    f"NEURONSERVE_RESTART_WINDOW_S={self.window_s:g})"
                )
            self.on_restart(reason)
            self._spawn(i)
        return None

    def _stuck(self, i: int, now: float) -> str | None:
        """Why worker `i` counts as stuck (its heartbeat too old), else None. Before its first beat it
        has START_S (its imports), or the timeout when that is longer."""
        beat, timeout = self.board.worker_beat(i), self.timeout_s
        setting = f"NEURONSERVE_FRONT_WORKER_TIMEOUT_S={timeout:g}"
        if beat < self.started[i]:
            allowed = max(timeout, START_S)
            if now - self.started[i] <= allowed:
                return None
            return f"has not reported in the {allowed:g} s since it started ({setting})"
        if now - beat <= timeout:
            return None
        return f"has not reported for {now - beat:.1f} s: its event loop is stopped or blocked ({setting})"

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p is not None]

    def stop(self) -> None:
        """Close every worker's stdin (it stops serving and exits), wait, then kill what remains."""
        live = [p for p in self.procs if p is not None]
        for proc in live:
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
        deadline = time.monotonic() + STOP_WAIT_S
        for proc in live:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("front worker pid %d did not stop: killed", proc.pid)
                proc.kill()
                proc.wait()
        self.procs = [None] * self.count

    def close(self) -> None:
        for sock in self.socks:
            sock.close()
        self.board.close()
        os.close(self.board.fd)
        shutil.rmtree(self.metrics_dir, ignore_errors=True)


def _remove_stale_metrics(tmp: Path) -> None:
    """Metrics directories left by a supervisor that could not clean up (SIGKILL, OOM): removed when
    the pid in their name runs no more."""
    for path in tmp.glob(f"{METRICS_PREFIX}*-*"):
        pid = path.name.removeprefix(METRICS_PREFIX).split("-", 1)[0]
        if not pid.isdecimal() or Path(f"/proc/{pid}").exists():
            continue
        log.info("removing %s, left by a server that is gone", path)
        shutil.rmtree(path, ignore_errors=True)


def _forget_metrics(pid: int, path: str) -> None:
    """prometheus_client's bookkeeping for a dead process (its live gauges go; its counters stay)."""
    from prometheus_client import multiprocess  # noqa: PLC0415

    multiprocess.mark_process_dead(pid, path)  # type: ignore[no-untyped-call]
