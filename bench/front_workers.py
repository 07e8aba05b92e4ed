"""Front workers at start and at a worker's death (not a test): what a prober on new connections sees.

`start`: `neuronserve serve` before the stand-in engine (tests/support/standin_engine), N starts each
with NEURONSERVE_FRONT_WORKERS=1 and =2, alternating; from the process's start, a probe connects every
5 ms until a connection is accepted (SageMaker wants sockets accepted within 250 ms), then asks /ping
until one is answered (any status: 503 STAGING is an answer).

`kill`: one server with 2 workers; two probe threads ask /ping on new connections without pause while
worker 0 is SIGKILLed, N times: when its replacement started, and the slowest probe and every
non-200 meanwhile.

    PYTHONPATH=src:. python bench/front_workers.py start [--runs 3]
    PYTHONPATH=src:. python bench/front_workers.py kill [--runs 3]
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.server import free_port
from tests.support.standin_server import StandinServer, standin_env, standin_server
from tests.support.workers import fresh, worker_pids


def _ping(port: int, timeout: float) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/ping")
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def start_once(workers: int, tmp: Path) -> tuple[float, float]:
    """(seconds to the first accepted connection, to the first /ping answer) from the process start."""
    port = free_port()
    env = standin_env(tmp, port, NEURONSERVE_FRONT_WORKERS=str(workers))
    t0 = time.monotonic()
    with (tmp / "serve.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "neuronserve", "serve", "--device", "neuron"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(tmp),
        )
    accepted = answered = None
    try:
        while accepted is None and time.monotonic() - t0 < 30:
            try:
                socket_ok = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                socket_ok.connect()
                socket_ok.close()
                accepted = time.monotonic() - t0
            except OSError:
                time.sleep(0.005)
        while answered is None and time.monotonic() - t0 < 30:
            try:
                _ping(port, 10)
                answered = time.monotonic() - t0
            except OSError:
                time.sleep(0.005)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert accepted is not None and answered is not None, (tmp / "serve.log").read_text()[-2000:]
    return accepted, answered


def start(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            for workers in (1, 2):
                where = Path(tmp) / f"{workers}-{i}"
                where.mkdir()
                accepted, answered = start_once(workers, where)
                print(
                    f"workers {workers}: first connection accepted {accepted * 1000:.0f} ms, "
                    f"first /ping answered {answered * 1000:.0f} ms after the process started",
                    flush=True,
                )


def kill(runs: int) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        standin_server(Path(tmp), NEURONSERVE_FRONT_WORKERS="2") as server,
    ):
        for i in range(runs):
            _kill_once(server, i)


def _kill_once(server: StandinServer, i: int) -> None:
    victim = worker_pids(server)[0]
    seen: list[tuple[float, object]] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            t = time.monotonic()
            try:
                status: object = fresh(server, "GET", "/ping", timeout=20).status_code
            except OSError as err:
                status = type(err).__name__
            seen.append((time.monotonic() - t, status))

    threads = [threading.Thread(target=probe) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    while worker_pids(server)[0] == victim:
        time.sleep(0.005)
    replaced = time.monotonic() - t0
    time.sleep(3.0)  # the replacement imports and serves
    stop.set()
    for t in threads:
        t.join()
    bad = [status for _, status in seen if status != 200]
    slowest = max(took for took, _ in seen)
    print(
        f"kill {i}: replacement started {replaced * 1000:.0f} ms after the SIGKILL; {len(seen)} probes, "
        f"slowest {slowest * 1000:.0f} ms, not 200: {bad or 'none'}",
        flush=True,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("start", "kill"))
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    start(args.runs) if args.what == "start" else kill(args.runs)


if __name__ == "__main__":
    main()
