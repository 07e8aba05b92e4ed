"""Serving overhead benchmark (not a test): our front's /invocations vs the engine's own /invocations.

One `neuronserve serve` is started; the same engine is measured directly (its internal port) and through
the front, in alternating rounds (A B B A) so drift on a busy machine hits both sides alike. Reports
latency p50/p99 ratios and throughput ratios at concurrency 1, 8 and 32, the streamed time-to-first-token
ratio, and /ping p99 while the engine is saturated.

    PYTHONPATH=src:. python bench/bench_serve.py [--model tiny|smollm2|PATH] [--requests N] [--levels 1,8,32]
        [--repeat K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.server import Server, base_env, start_server

BODY = {"prompt": "The capital of France is", "max_tokens": 16, "temperature": 0, "ignore_eos": True}


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


async def load(
    client: httpx.AsyncClient, url: str, concurrency: int, total: int
) -> tuple[list[float], float]:
    """`total` requests, `concurrency` at a time; returns per-request latencies and requests/s."""
    latencies: list[float] = []
    queue = iter(range(total))

    async def worker() -> None:
        for _ in queue:
            t0 = time.perf_counter()
            r = await client.post(url, json=BODY)
            r.raise_for_status()
            latencies.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, total / (time.perf_counter() - t0)


async def first_token(client: httpx.AsyncClient, url: str) -> float:
    """Seconds from sending a streamed request to the first SSE event (the whole stream is read)."""
    t0 = time.perf_counter()
    first = None
    # 4 tokens: the first is what is timed; the rest only makes the stream a real one
    async with client.stream("POST", url, json={**BODY, "max_tokens": 4, "stream": True}) as r:
        async for chunk in r.aiter_raw():
            if first is None and b"data:" in chunk:
                first = time.perf_counter() - t0
    assert first is not None
    return first


async def ttft(client: httpx.AsyncClient, front: str, engine: str, n: int) -> dict[str, list[float]]:
    """`n` streamed requests per side, one at a time, alternating front and engine request by
    request (ABBA), so that drift on a shared machine hits both sides alike."""
    out: dict[str, list[float]] = {"front": [], "engine": []}
    for i in range(n):
        order = ("front", "engine") if i % 2 == 0 else ("engine", "front")
        for side in order:
            base = front if side == "front" else engine
            out[side].append(await first_token(client, f"{base}/invocations"))
    return out


PINGER = """
import http.client, json, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
out, bad, stop = [], 0, time.monotonic() + seconds
while time.monotonic() < stop:
    t0 = time.perf_counter()
    conn.request("GET", "/ping")
    r = conn.getresponse()
    r.read()
    out.append(time.perf_counter() - t0)
    bad += r.status != 200
    time.sleep(0.02)
print(json.dumps({"lat": out, "not_200": bad}))
"""


async def ping_under_saturation(client: httpx.AsyncClient, front: str, seconds: float) -> dict[str, Any]:
    """64 long generations in flight through the front while a separate process pings it.

    The pinger is its own process (stdlib http.client, one keep-alive connection) so the flood's
    client work does not inflate the measured /ping latency.
    """
    body = {**BODY, "max_tokens": 200}
    stop = time.monotonic() + seconds + 2.0

    async def flood() -> None:
        while time.monotonic() < stop:
            await client.post(f"{front}/invocations", json=body)

    floods = [asyncio.create_task(flood()) for _ in range(64)]
    await asyncio.sleep(2.0)  # let the flood fill the engine
    port = front.rsplit(":", 1)[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PINGER, port, str(seconds), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    await asyncio.gather(*floods)
    data = json.loads(out)
    lat = data["lat"]
    return {
        "n": len(lat),
        "not_200": data["not_200"],
        "p50_ms": 1000 * pct(lat, 50),
        "p99_ms": 1000 * pct(lat, 99),
    }


async def overhead(client: httpx.AsyncClient, front: str, engine: str, n: int) -> dict[str, float]:
    """Absolute added latency of one hop through the front: 1-token requests, one at a time."""
    body = {**BODY, "max_tokens": 1}
    res = {}
    for name, base in (("front", front), ("engine", engine), ("engine2", engine), ("front2", front)):
        lat = []
        for _ in range(n):
            t0 = time.perf_counter()
            (await client.post(f"{base}/invocations", json=body)).raise_for_status()
            lat.append(time.perf_counter() - t0)
        res[name] = lat
    f = res["front"] + res["front2"]
    e = res["engine"] + res["engine2"]
    return {"front_p50_ms": 1000 * pct(f, 50), "engine_p50_ms": 1000 * pct(e, 50)}


async def run(  # noqa: PLR0917
    front: str, engine: str, requests: int, levels: list[int], per_worker: int, ttft_n: int, repeat: int
) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    results: dict[str, Any] = {"load": {}}
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        for base in (front, engine):  # warm up both paths
            await load(client, f"{base}/invocations", 4, 8)
        for conc in levels:
            # at least `per_worker` requests per connection: with one wave per round the p99 of a
            # level would be the slowest request of a single batch, i.e. a max, not a percentile
            total = max(requests, per_worker * conc)
            lat: dict[str, list[float]] = {"front": [], "engine": []}
            rps: dict[str, list[float]] = {"front": [], "engine": []}
            for side in ("front", "engine", "engine", "front") * repeat:
                base = front if side == "front" else engine
                lats, r = await load(client, f"{base}/invocations", conc, total)
                lat[side] += lats
                rps[side].append(r)
            row: dict[str, Any] = {
                side: {
                    "n": len(lat[side]),
                    "p50_ms": 1000 * pct(lat[side], 50),
                    "p99_ms": 1000 * pct(lat[side], 99),
                    "rps": statistics.mean(rps[side]),
                    "rps_rounds": rps[side],
                }
                for side in lat
            }
            row["p50_ratio"] = row["front"]["p50_ms"] / row["engine"]["p50_ms"]
            row["p99_ratio"] = row["front"]["p99_ms"] / row["engine"]["p99_ms"]
            row["throughput_ratio"] = row["front"]["rps"] / row["engine"]["rps"]
            results["load"][conc] = row
            print(f"c={conc}: {json.dumps(row)}", file=sys.stderr)
        times = await ttft(client, front, engine, ttft_n)
        t_front, t_engine = times["front"], times["engine"]
        results["ttft"] = {
            "n_per_side": ttft_n,
            "front_p50_ms": 1000 * pct(t_front, 50),
            "engine_p50_ms": 1000 * pct(t_engine, 50),
            "ratio": pct(t_front, 50) / pct(t_engine, 50),
        }
        print(f"ttft: {json.dumps(results['ttft'])}", file=sys.stderr)
        results["one_token"] = await overhead(client, front, engine, 30)
        print(f"one token: {json.dumps(results['one_token'])}", file=sys.stderr)
        results["ping_saturated"] = await ping_under_saturation(client, front, 15.0)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="tiny (test model), smollm2, or a model directory")
    ap.add_argument("--requests", type=int, default=48, help="requests per round and concurrency level")
    ap.add_argument("--levels", default="1,8,32", help="concurrency levels, comma-separated")
    ap.add_argument(
        "--per-worker", type=int, default=6, help="at least this many requests per connection and round"
    )
    ap.add_argument("--ttft-requests", type=int, default=60, help="streamed requests per side for TTFT")
    ap.add_argument(
        "--repeat", type=int, default=1, help="A B B A cycles per level (more samples, tighter percentiles)"
    )
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    if args.model == "tiny":
        from tests.support.tiny_model import tiny_model_dir  # noqa: PLC0415

        model = tiny_model_dir()
    elif args.model == "smollm2":
        from neuronserve.models_local import smollm2_dir  # noqa: PLC0415

        model = smollm2_dir()
    else:
        model = Path(args.model)
    work = Path(tempfile.mkdtemp(prefix="ns-bench-"))
    env = base_env(
        model, work, SM_VLLM_MAX_MODEL_LEN="512", SM_VLLM_MAX_NUM_SEQS="32", SM_VLLM_DTYPE="float32"
    )
    server: Server = start_server(env, work / "server.log")
    try:
        server.wait_ready(300)
        engine = f"http://127.0.0.1:{env['NEURONSERVE_ENGINE_PORT']}"
        levels = [int(x) for x in args.levels.split(",") if x.strip()]
        results = asyncio.run(
            run(server.url, engine, args.requests, levels, args.per_worker, args.ttft_requests, args.repeat)
        )
    finally:
        server.stop()
    results["model"] = str(model)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
