"""/ping latency while the front is loaded: a separate process, a NEW connection per ping (as SageMaker's
health check, load balancers and Docker's HEALTHCHECK connect), every `interval` seconds.

Run by bench_ceiling.py during each front round (`start`, then `finish` once the round is over); as a
script it prints one JSON object: the latencies' count, failures, p50, p99 and max in milliseconds.
Only the standard library (bench/ping_probe.py uses its ping too).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

INTERVAL_S = 0.025  # up to 40 pings/s, ~0.6 ms of front CPU each: ~2 % of a saturated front (counted in it)
REQUEST = b"GET /ping HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))] if s else 0.0


def ping_once(port: int) -> tuple[float, int]:
    """(milliseconds, the answer's HTTP status; -1 when it was not HTTP) of one /ping on a new connection."""
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(REQUEST)
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else -1
    return (time.perf_counter() - t0) * 1000.0, status


def probe(port: int, seconds: float, interval: float) -> dict[str, Any]:
    times: list[float] = []
    failed = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            ms, status = ping_once(port)
            times.append(ms)
            failed += status != 200
        except OSError:
            failed += 1
        time.sleep(interval)
    return {
        "n": len(times),
        "failed": failed,
        "p50_ms": pct(times, 50),
        "p99_ms": pct(times, 99),
        "max_ms": max(times, default=0.0),
        "times_ms": [round(t, 3) for t in times],
    }


def start(port: int, seconds: float, interval: float = INTERVAL_S) -> subprocess.Popen[bytes]:
    argv = [sys.executable, str(Path(__file__).resolve()), str(port), str(seconds), str(interval)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE)


def finish(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=60)
    return dict(json.loads(out))


def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    times = [t for r in results for t in r["times_ms"]]
    return {
        "n": len(times),
        "failed": sum(r["failed"] for r in results),
        "p50_ms": pct(times, 50),
        "p99_ms": pct(times, 99),
        "max_ms": max(times, default=0.0),
    }


if __name__ == "__main__":
    print(json.dumps(probe(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]))))
