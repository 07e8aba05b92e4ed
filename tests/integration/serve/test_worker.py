"""Front worker processes over their lives: a killed worker is replaced and its share of the limit
comes back, workers never outlive their supervisor, SIGTERM to the whole process group still drains,
and every worker tells the same phase through STAGING, a replica's death, and a fatal engine death.

The real server runs before the stand-in engine (tests/support/standin_server.py), with two front
workers; requests go on connections of their own so SO_REUSEPORT spreads them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from tests.support.s3server import ServerControl
from tests.support.server import free_port, free_port_run
from tests.support.standin_server import StandinServer, standin_env, standin_server
from tests.support.workers import (
    WORKER,
    alive,
    clients_on,
    engine_pid,
    fresh,
    spread,
    wait_for,
    worker_pids,
    workers_of,
)

from ..conftest import model_from_s3

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

HOLD = {"model": "standin", "prompt": "standin-hold", "max_tokens": 1}
TWO = {"NEURONSERVE_FRONT_WORKERS": "2", "STANDIN_HOLD_S": "3"}


def _in_flight(server: StandinServer) -> float:
    for line in fresh(server, "GET", "/metrics").text.splitlines():
        if line.startswith("neuronserve_in_flight "):
            return float(line.split()[1])
    raise AssertionError("no neuronserve_in_flight")


def _hold(server: StandinServer, n: int) -> tuple[list[threading.Thread], list[object]]:
    out: list[object] = []

    def one() -> None:
        try:
            out.append(fresh(server, "POST", "/v1/completions", json=HOLD).status_code)
        except httpx.TransportError as err:
            out.append(type(err).__name__)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    return threads, out


def test_a_killed_worker_is_replaced_and_its_slots_come_back(tmp_path: Path) -> None:
    with standin_server(tmp_path, NEURONSERVE_MAX_CONCURRENCY="4", **TWO) as server:
        victim = worker_pids(server)[0]
        clients = clients_on(server, 2)  # two held requests on each worker
        out: dict[str, list[object]] = {w: [] for w in clients}

        def hold(client: httpx.Client, worker: str) -> None:
            try:
                out[worker].append(client.post("/v1/completions", json=HOLD).status_code)
            except httpx.TransportError as err:
                out[worker].append(type(err).__name__)

        threads = [threading.Thread(target=hold, args=(c, w)) for w, cs in clients.items() for c in cs]
        for t in threads:
            t.start()
        wait_for(lambda: _in_flight(server) == 4, 10, "4 held requests")
        os.kill(victim, signal.SIGKILL)
        # the port keeps answering meanwhile: connections hashed to the dead worker's socket wait for
        # its replacement in the socket's backlog (the supervisor keeps the socket open)
        answered = [fresh(server, "GET", "/ping", timeout=20).status_code for _ in range(10)]
        assert answered == [200] * 10
        wait_for(lambda: worker_pids(server)[0] != victim, 10, "the replacement")
        assert "front worker 0 exited with code -9: restarting it" in server.log()
        for t in threads:
            t.join()
        assert out["1"] == [200, 200]  # the other worker's requests are unharmed
        assert 200 not in out["0"] and len(out["0"]) == 2  # the killed worker's are gone with it
        # ... and so is their weight: the whole limit is free again
        wait_for(lambda: _in_flight(server) == 0, 10, "in flight back to 0")
        threads, held = _hold(server, 4)
        for t in threads:
            t.join()
        assert held == [200] * 4
        assert workers_of(spread(server, "GET", "/ping", 4)) == {"0", "1"}


def test_workers_do_not_outlive_their_supervisor(tmp_path: Path) -> None:
    with standin_server(tmp_path, **TWO) as server:
        pids = list(worker_pids(server).values())
        engine = engine_pid(server)
        server.proc.kill()
        server.proc.wait()
        wait_for(lambda: not any(alive(p) for p in pids), 10, "the workers to exit")
        wait_for(lambda: not alive(engine), 15, "the engine to exit")


def test_sigterm_to_the_process_group_drains(tmp_path: Path) -> None:
    """`kill -TERM -<pgid>` (a runtime that signals every process) reaches the workers too: they
    leave the drain to the supervisor, the held requests finish and the exit is 0."""
    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("ab") as out_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "neuronserve", "serve", "--device", "neuron"],
            env=standin_env(tmp_path, port, **TWO),
            stdout=out_file,
            stderr=subprocess.STDOUT,
            cwd=str(tmp_path),
            start_new_session=True,
        )
    server = StandinServer(proc, port, log_path)
    try:
        wait_for(lambda: _ping(server) == 200, 90, "READY")
        threads, out = _hold(server, 4)
        wait_for(lambda: _in_flight(server) == 4, 10, "4 held requests")
        os.killpg(proc.pid, signal.SIGTERM)
        for t in threads:
            t.join()
        assert out == [200] * 4
        assert proc.wait(timeout=30) == 0
        assert "drained: no request in flight" in server.log()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _ping(server: StandinServer) -> int:
    try:
        return fresh(server, "GET", "/ping", timeout=2).status_code
    except httpx.TransportError:
        return 0


def test_every_worker_tells_the_same_phase(
    tmp_path: Path, s3_server: ServerControl, s3_tiny_model: str
) -> None:
    """STAGING (the weights' download held), READY, a replica's death (NEURONSERVE_MIN_READY_REPLICAS=2:
    /ping 503 while it restarts), READY again: /ping and /live answer alike from both workers."""
    release = threading.Event()
    s3_server.hold["/integration-models/tiny/model.safetensors"] = release
    settings = {
        **TWO,
        "NEURONSERVE_DATA_PARALLEL": "2",
        "NEURON_RT_VISIBLE_CORES": "0,1",
        "NEURONSERVE_MIN_READY_REPLICAS": "2",
        "NEURONSERVE_ENGINE_PORT": str(free_port_run(2)),
    }
    settings.update(model_from_s3({}, s3_tiny_model, s3_server))
    try:
        with standin_server(tmp_path, ready=False, **settings) as server:
            wait_for(lambda: _ping(server) == 503, 60, "the front")
            pings = spread(server, "GET", "/ping", 8)
            assert {r.json()["phase"] for r in pings} == {"STAGING"}
            lives = spread(server, "GET", "/live", 8)
            assert {(r.status_code, r.json()["phase"]) for r in lives} == {(200, "STAGING")}
            release.set()
            wait_for(lambda: _ping(server) == 200, 90, "READY")
            assert {r.status_code for r in spread(server, "GET", "/ping", 8)} == {200}
            os.kill(_replica_pid(server, 1), signal.SIGKILL)
            wait_for(lambda: _ping(server) == 503, 5, "/ping 503 after the replica died")
            down = spread(server, "GET", "/ping", 6)
            assert {r.status_code for r in down} == {503}, [r.text for r in down]
            assert all(b.json()["detail"] == down[0].json()["detail"] for b in down)
            assert {r.status_code for r in spread(server, "GET", "/live", 6)} == {200}
            wait_for(lambda: _ping(server) == 200, 60, "READY again")
            assert {r.status_code for r in spread(server, "GET", "/ping", 8)} == {200}
    finally:
        release.set()


def _replica_pid(server: StandinServer, index: int) -> int:
    import re

    found = re.findall(rf"replica {index} started: pid (\d+)", server.log())
    assert found, server.log()[-2000:]
    return int(found[-1])


def _raw_ping(port: int) -> int:
    """/ping's status on a connection of its own, over a plain socket: about a millisecond, where an
    httpx client costs tens (its TLS context), so the probes below sample the short time between the
    engine's death and the exit densely (with httpx, 15-20 probes in all, and once in about 25 runs none
    in that time)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.sendall(b"GET /ping HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            head = b""
            while b"\r\n" not in head:
                chunk = conn.recv(256)
                if not chunk:
                    return 0
                head += chunk
        return int(head.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        return 0


def test_a_fatal_engine_death_reaches_every_worker_and_exits_1(tmp_path: Path) -> None:
    """The only engine dies: no worker answers 200 once one answered 503, the server exits 1 and its
    workers with it."""
    with standin_server(tmp_path, **TWO) as server:
        pids = list(worker_pids(server).values())
        seen: list[tuple[float, float, int]] = []  # (asked, answered, status)
        stop = threading.Event()

        def probe() -> None:
            while not stop.is_set():
                asked = time.monotonic()
                status = _raw_ping(server.port)
                seen.append((asked, time.monotonic(), status))

        probes = [threading.Thread(target=probe) for _ in range(4)]
        for t in probes:
            t.start()
        os.kill(engine_pid(server), signal.SIGKILL)
        code = server.proc.wait(timeout=30)
        stop.set()
        for t in probes:
            t.join()
        assert code == 1
        first = min((answered for _, answered, status in seen if status == 503), default=None)
        assert first is not None, seen[-20:]
        # once one worker said 503, no probe asked afterwards got 200 from any worker
        assert all(status != 200 for asked, _, status in seen if asked > first), seen
        assert "the engine exited with code -9" in server.log()
        wait_for(lambda: not any(alive(p) for p in pids), 10, "the workers to exit")


def test_the_default_is_one_process_and_nothing_more(tmp_path: Path) -> None:
    """NEURONSERVE_FRONT_WORKERS unset: the supervisor serves the front itself (no worker process, no
    worker header, no metrics directory), as before workers existed."""
    with standin_server(tmp_path) as server:
        r = fresh(server, "GET", "/ping")
        assert r.status_code == 200 and WORKER not in r.headers
        children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()
        cmdlines = [Path(f"/proc/{c}/cmdline").read_bytes() for c in children]
        assert not any(b"neuronserve.serve.worker" in c for c in cmdlines), cmdlines
        assert "front worker" not in server.log()
        assert "neuronserve_in_flight 0.0" in fresh(server, "GET", "/metrics").text
