"""Helpers for the tests of several front workers (NEURONSERVE_FRONT_WORKERS): requests on fresh
connections (SO_REUSEPORT spreads connections, not requests, over the workers) and the processes'
pids from the server's log."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import httpx
from tests.support.standin_server import StandinServer

WORKER = "x-neuronserve-worker"


def fresh(server: StandinServer, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One request on a connection of its own."""
    kwargs.setdefault("timeout", 30)
    with httpx.Client(base_url=server.url) as client:
        return client.request(method, path, **kwargs)


def spread(server: StandinServer, method: str, path: str, n: int, **kwargs: Any) -> list[httpx.Response]:
    """`n` requests, each on a new connection, until both workers answered (at most 4 n requests)."""
    out: list[httpx.Response] = []
    while len(out) < n or len({r.headers.get(WORKER) for r in out}) < 2:
        out.append(fresh(server, method, path, **kwargs))
        assert len(out) <= 4 * n, f"one worker answered every connection: {[r.headers for r in out]}"
    return out


def workers_of(responses: list[httpx.Response]) -> set[str | None]:
    return {r.headers.get(WORKER) for r in responses}


def worker_pids(server: StandinServer) -> dict[int, int]:
    """Each worker's current pid (its last start in the log)."""
    found = re.findall(r"front worker (\d+) started: pid (\d+)", server.log())
    return {int(i): int(pid) for i, pid in found}


def engine_pid(server: StandinServer) -> int:
    found = re.findall(r"replica 0 started: pid (\d+)", server.log())
    assert found, server.log()[-2000:]
    return int(found[-1])


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def clients_on(server: StandinServer, per_worker: int, workers: int = 2) -> dict[str, list[httpx.Client]]:
    """`per_worker` clients whose one keep-alive connection is served by each worker (a /ping on a new
    connection says which worker it reached; connections are opened until each worker has its share)."""
    got: dict[str, list[httpx.Client]] = {str(w): [] for w in range(workers)}
    spare: list[httpx.Client] = []
    for _ in range(40 * per_worker * workers):
        if all(len(c) >= per_worker for c in got.values()):
            break
        client = httpx.Client(base_url=server.url, timeout=30)
        worker = client.get("/ping").headers.get(WORKER)
        if worker in got and len(got[worker]) < per_worker:
            got[worker].append(client)
        else:
            spare.append(client)
    for client in spare:
        client.close()
    assert all(len(c) == per_worker for c in got.values()), {w: len(c) for w, c in got.items()}
    return got
