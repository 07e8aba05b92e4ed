"""/ping on NEW connections while the engine is saturated (not a test): what load balancers, Docker's
HEALTHCHECK and SageMaker's probe (2 s limit) see.

One `neuronserve serve` on the tiny model with max_num_seqs 4; N clients (default 8) keep it saturated
with queued requests; a separate probe process opens a fresh TCP connection per /ping every 50 ms,
both to the front and to the engine's own port, and reports p50/p99/max in milliseconds. Load and probe
run in their own processes so the probe's timing does not queue behind the load generator's GIL.

    PYTHONPATH=src:. python bench/ping_probe.py [--seconds 60] [--clients 8] [--engine-nice N]

`--engine-nice` sets NEURONSERVE_ENGINE_NICE for the run (0 = the engine at the front's priority), to
compare against the default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.ceiling.probe import pct, ping_once
from tests.support.server import base_env, start_server
from tests.support.tiny_model import tiny_model_dir

BODY = {"prompt": "The capital of France is", "max_tokens": 64, "ignore_eos": True}


def probe(port: int, seconds: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    samples: list[tuple[float, int]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            samples.append(ping_once(port))
        except OSError:
            samples.append((10_000.0, -1))
        time.sleep(0.05)
    out.put(samples)


def load(url: str, clients: int, seconds: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    async def run() -> int:
        done = 0
        end = time.monotonic() + seconds
        limits = httpx.Limits(max_connections=clients)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:

            async def worker() -> None:
                nonlocal done
                while time.monotonic() < end:
                    r = await client.post(f"{url}/invocations", json=BODY)
                    done += r.status_code == 200

            await asyncio.gather(*(worker() for _ in range(clients)))
        return done

    out.put(asyncio.run(run()))


def bare_server(port_out: mp.Queue) -> None:  # type: ignore[type-arg]
    """A minimal asyncio HTTP responder: the control. If it shows the same tail as the front, the
    delay is the machine's (scheduling of any process), not something the front does."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    async def run() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=2048)
        port_out.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(run())


def summary(samples: list[tuple[float, int]]) -> dict[str, float]:
    ms = [m for m, _ in samples]
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 1),
        "p99_ms": round(pct(ms, 99), 1),
        "max_ms": round(max(ms), 1),
        "over_2s": sum(m > 2000 for m in ms),
        "not_200": sum(st != 200 for _, st in samples),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--engine-nice", type=int, default=None)
    args = ap.parse_args()
    extra = {"SM_VLLM_MAX_NUM_SEQS": "4", "SM_VLLM_MAX_MODEL_LEN": "256"}
    if args.engine_nice is not None:
        extra["NEURONSERVE_ENGINE_NICE"] = str(args.engine_nice)
    with tempfile.TemporaryDirectory() as tmp:
        env = base_env(tiny_model_dir(), Path(tmp) / "work", **extra)
        server = start_server(env, Path(tmp) / "server.log")
        try:
            server.wait_ready(300)
            engine_port = int(env["NEURONSERVE_ENGINE_PORT"])
            httpx.post(f"{server.url}/invocations", json=BODY, timeout=120).raise_for_status()
            ctx = mp.get_context("spawn")
            q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
            loader = ctx.Process(target=load, args=(server.url, args.clients, args.seconds + 4, q))
            loader.start()
            time.sleep(3.0)  # saturated, with requests queued behind max_num_seqs
            front_q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
            engine_q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
            bare_q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
            bare = ctx.Process(target=bare_server, args=(bare_q,), daemon=True)
            bare.start()
            bare_port = bare_q.get()
            probes = [
                ctx.Process(target=probe, args=(server.port, args.seconds, front_q)),
                ctx.Process(target=probe, args=(engine_port, args.seconds, engine_q)),
                ctx.Process(target=probe, args=(bare_port, args.seconds, bare_q)),
            ]
            for p in probes:
                p.start()
            front, engine, control = front_q.get(), engine_q.get(), bare_q.get()
            for p in probes:
                p.join()
            bare.kill()
            completed = q.get()
            loader.join()
        finally:
            server.stop()
    result = {
        "clients": args.clients,
        "max_num_seqs": 4,
        "seconds": args.seconds,
        "engine_nice": args.engine_nice if args.engine_nice is not None else "default",
        "requests_completed": completed,
        "front_ping_new_connection": summary(front),
        "engine_ping_new_connection": summary(engine),
        "bare_asyncio_server_new_connection": summary(control),
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
