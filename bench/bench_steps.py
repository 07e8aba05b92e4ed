"""What each guarantee costs in a request path written as one piece (not a test, not run by CI).

bench/ceiling/floor_relay.py `one` serves a non-streamed TGI body in one coroutine with every step the
front takes for it; FLOOR_ONE_SKIP leaves steps out (`watcher`: the disconnect watch (a Departure
callback on the front's connections, the watcher task before they had one),
`metrics`: the request metrics, `log`: the access line). This starts the synthetic engine and one such
relay per variant, then runs wrk against each in turn (the variants in order, then reversed, `--rounds`
times), and prints the relay's CPU per request for each. The difference between two variants is what
the steps left out cost. docs/PERFORMANCE.md ("A request path in one piece, measured") has the figures.

    PYTHONPATH=src:. python bench/bench_steps.py [--variants ",log,watcher,metrics"] [--rounds 2]
        [--mode one|oneraw]

`--mode oneraw`: the same steps below uvicorn (floor_relay.py `oneraw`, whose disconnect is noticed by
the connection: no watcher to leave out).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import bench_floor
from bench.ceiling import procs, wrk
from tests.support.server import free_port

REPO = Path(__file__).resolve().parents[1]
BODY: dict[str, object] = {"inputs": "hello there", "parameters": {"max_new_tokens": 16}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--variants", default=",log,watcher,metrics", help="FLOOR_ONE_SKIP values, comma-separated"
    )
    p.add_argument("--rounds", type=int, default=2, help="cycles (default 2)")
    p.add_argument("--mode", choices=("one", "oneraw"), default="one", help="the relay (default one)")
    p.add_argument("--duration", type=float, default=5.0, help="seconds per round (default 5)")
    args = p.parse_args(argv)
    variants = [v.replace("+", ",") for v in args.variants.split(",")]  # `log+watcher`: both left out
    wrk_path = wrk.find(None)
    engine_port = free_port()
    engine_env = {**os.environ, "PYTHONPATH": str(REPO / "bench" / "synth_engine")}
    argv_engine = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--port", str(engine_port)]
    with tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp_name:
        tmp = Path(tmp_name)
        engine = subprocess.Popen(
            [*argv_engine, "--model", "m"],
            env=engine_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        relays: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
        try:
            bench_floor.wait_listening(engine, engine_port, "the synthetic engine")
            for v in variants:
                relays[v] = bench_floor.start_relay(engine_port, args.mode, tmp, "m", skip=v)
            lua = wrk.script(tmp, "one", BODY)
            spent = dict.fromkeys(variants, 0.0)
            done = dict.fromkeys(variants, 0)
            for v in variants:  # warm-up
                wrk.run(
                    wrk_path,
                    f"http://127.0.0.1:{relays[v][1]}/invocations",
                    lua,
                    seconds=1,
                    connections=32,
                    threads=1,
                )
            for _ in range(args.rounds):
                for v in (*variants, *reversed(variants)):
                    proc, port = relays[v]
                    before = procs.cpu_of(proc.pid)
                    url = f"http://127.0.0.1:{port}/invocations"
                    r = wrk.run(wrk_path, url, lua, seconds=args.duration, connections=32, threads=1)
                    if r.failed:
                        raise SystemExit(f"{r.failed} requests failed against the relay skipping {v!r}")
                    spent[v] += procs.cpu_of(proc.pid) - before
                    done[v] += r.requests
            for v in variants:
                print(
                    f"left out: {v or '-':24} {spent[v] / done[v] * 1e6:6.1f} µs/request ({done[v]} requests)"
                )
        finally:
            for proc, _ in relays.values():
                proc.terminate()
            engine.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
