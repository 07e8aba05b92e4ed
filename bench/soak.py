"""Soak benchmark (not a test): N minutes of mixed traffic on loopback, bounded in time and rate.

One `neuronserve serve` on the tiny test model. Workers send, at a fixed total rate, a rotating mix:
OpenAI chat and completions (plain and streamed), TGI and LMI generate (plain, SSE, JSON lines),
clients that disconnect mid-stream, oversize bodies (413) and malformed ones (400). Every minute it
records the front's RSS and open file descriptors, the engine's RSS (its whole process group),
p50/p99 latency of the answered requests and the counts by status. At the end: growth per hour of
RSS and descriptors (least squares over the minutes after the first), and the error rate (5xx and
transport errors over all requests; the provoked 4xx are expected answers, not errors).

    PYTHONPATH=src:. python bench/soak.py --minutes 20 [--rate 4] [--workers 6] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.server import base_env, start_server
from tests.support.tiny_model import tiny_model_dir

PAYLOAD_MB = 1
MIX: list[tuple[str, dict[str, Any] | bytes, dict[str, str], str]] = [
    ("chat", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}, {}, "plain"),
    ("completion_stream", {"prompt": "hello", "max_tokens": 32, "stream": True}, {}, "stream"),
    ("tgi", {"inputs": "hello", "parameters": {"max_new_tokens": 16}}, {}, "plain"),
    ("tgi_stream", {"inputs": "hello", "parameters": {"max_new_tokens": 16}, "stream": True}, {}, "stream"),
    (
        "lmi_jsonlines",
        {"inputs": "hello", "parameters": {"max_new_tokens": 16}, "stream": True},
        {"accept": "application/jsonlines"},
        "stream",
    ),
    ("disconnect", {"prompt": "hello", "max_tokens": 200, "ignore_eos": True, "stream": True}, {}, "leave"),
    ("completion", {"prompt": "hello", "max_tokens": 16}, {}, "plain"),
    ("oversize", b'{"prompt": "' + b"x" * (PAYLOAD_MB * 1024 * 1024 + 100) + b'"}', {}, "plain"),
    ("malformed", b'{"prompt": ', {}, "plain"),
]


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def group_rss_kb(pgid: int) -> int:
    total = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.getpgid(int(name)) == pgid:
                    total += rss_kb(int(name))
            except OSError:
                continue
    return total


def fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (minute, value), per hour."""
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return 60.0 * sum((x - mx) * (y - my) for x, y in points) / den if den else float("nan")


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.window: list[tuple[str, int, float]] = []  # (kind, status, seconds)
        self.totals: collections.Counter[str] = collections.Counter()

    def add(self, kind: str, status: int, seconds: float) -> None:
        with self.lock:
            self.window.append((kind, status, seconds))
            self.totals[str(status)] += 1

    def take(self) -> list[tuple[str, int, float]]:
        with self.lock:
            out, self.window = self.window, []
        return out


def one(client: httpx.Client, url: str, item: tuple[str, Any, dict[str, str], str], rec: Recorder) -> None:
    kind, body, headers, how = item
    hdrs = {"content-type": "application/json", **headers}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    t0 = time.perf_counter()
    try:
        if how == "plain":
            r = client.post(f"{url}/invocations", content=content, headers=hdrs)
            status = r.status_code
        else:
            with client.stream("POST", f"{url}/invocations", content=content, headers=hdrs) as r:
                status = r.status_code
                for i, _ in enumerate(r.iter_raw()):
                    if how == "leave" and i >= 1:
                        status = 499  # we left on purpose
                        break
    except httpx.TransportError:
        status = -1
    rec.add(kind, status, time.perf_counter() - t0)


def main() -> int:  # noqa: PLR0915 (one linear script: flags, run, report)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=4.0, help="requests per second, all workers together")
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    settings = {
        "SM_VLLM_MAX_MODEL_LEN": "512",
        "SM_VLLM_MAX_NUM_SEQS": "8",
        "NEURONSERVE_MAX_CONCURRENCY": "32",
        "SAGEMAKER_MAX_PAYLOAD_IN_MB": str(PAYLOAD_MB),
        "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "60",
    }
    rows: list[dict[str, Any]] = []
    rec = Recorder()
    with tempfile.TemporaryDirectory() as tmp:
        env = base_env(tiny_model_dir(), Path(tmp) / "work", **settings)
        server = start_server(env, Path(tmp) / "server.log")
        try:
            server.wait_ready(300)
            engine = server.engine_pid()
            end = time.monotonic() + args.minutes * 60
            mix = itertools.cycle(MIX)
            mix_lock = threading.Lock()
            interval = args.workers / args.rate

            def worker(offset: float) -> None:
                time.sleep(offset)
                with httpx.Client(timeout=90) as client:
                    while time.monotonic() < end:
                        t0 = time.monotonic()
                        with mix_lock:
                            item = next(mix)
                        one(client, server.url, item, rec)
                        time.sleep(max(0.0, interval - (time.monotonic() - t0)))

            threads = [
                threading.Thread(target=worker, args=(i * interval / args.workers,), daemon=True)
                for i in range(args.workers)
            ]
            for t in threads:
                t.start()
            minute = 0
            while time.monotonic() < end:
                time.sleep(min(60.0, max(0.0, end - time.monotonic())))
                minute += 1
                window = rec.take()
                ok = [s for k, st, s in window if st == 200]
                rows.append(
                    {
                        "minute": minute,
                        "front_rss_mb": round(rss_kb(server.proc.pid) / 1024, 1),
                        "front_fds": fds(server.proc.pid),
                        "engine_rss_mb": round(group_rss_kb(engine) / 1024, 1),
                        "requests": len(window),
                        "p50_s": round(pct(ok, 50), 3),
                        "p99_s": round(pct(ok, 99), 3),
                        "by_status": dict(
                            sorted(collections.Counter(str(st) for _, st, _ in window).items())
                        ),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
            for t in threads:
                t.join(timeout=120)
            alive = server.proc.poll() is None
        finally:
            server.stop()
    total = sum(rec.totals.values())
    errors = sum(n for st, n in rec.totals.items() if st == "-1" or st.startswith("5"))
    later = rows[1:] if len(rows) > 2 else rows
    report = {
        "minutes": args.minutes,
        "rate_per_s": args.rate,
        "requests": total,
        "by_status": dict(sorted(rec.totals.items())),
        "error_rate": round(errors / total, 5) if total else None,
        "front_rss_mb_per_hour": round(slope_per_hour([(r["minute"], r["front_rss_mb"]) for r in later]), 2),
        "front_fds_per_hour": round(slope_per_hour([(r["minute"], r["front_fds"]) for r in later]), 2),
        "engine_rss_mb_per_hour": round(
            slope_per_hour([(r["minute"], r["engine_rss_mb"]) for r in later]), 2
        ),
        "server_alive_at_end": alive,
        "rows": rows,
    }
    print("| min | front RSS MB | front fds | engine RSS MB | requests | p50 s | p99 s | by status |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['minute']} | {r['front_rss_mb']} | {r['front_fds']} | {r['engine_rss_mb']} "
            f"| {r['requests']} | {r['p50_s']} | {r['p99_s']} | {r['by_status']} |"
        )
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
