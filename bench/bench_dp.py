"""Data-parallel benchmark (not a test): the same load against `neuronserve serve` with DP 1 and DP 2.

Each configuration is started fresh (DP 2 = two vLLM CPU engines, one CPU core each, behind the front's
least-outstanding router), warmed, then driven at each concurrency level with the same greedy requests
of fixed length (ignore_eos), alternating the order of levels. Prints requests/s and output tokens/s
per level and the DP2 / DP1 ratio.

    PYTHONPATH=src:. python bench/bench_dp.py [--model tiny|PATH] [--requests N] [--levels 4,16] [--tokens T]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.server import Server, base_env, free_port_run, start_server
from tests.support.tiny_model import tiny_model_dir


async def drive(url: str, concurrency: int, total: int, tokens: int) -> tuple[float, dict[str, int]]:
    """`total` requests, `concurrency` at a time; returns requests/s and requests per replica."""
    body = {"prompt": "The capital of France is", "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    per_replica: dict[str, int] = {}
    queue = iter(range(total))
    async with httpx.AsyncClient(timeout=300) as client:

        async def worker() -> None:
            for _ in queue:
                r = await client.post(url, json=body)
                r.raise_for_status()
                rep = r.headers.get("x-neuronserve-replica", "-")
                per_replica[rep] = per_replica.get(rep, 0) + 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return total / (time.perf_counter() - t0), per_replica


def run_config(dp: int, model: Path, args: argparse.Namespace, work: Path) -> dict[str, object]:
    env = base_env(
        model,
        work / f"dp{dp}",
        SM_VLLM_MAX_MODEL_LEN="512",
        SM_VLLM_MAX_NUM_SEQS="32",
        SM_VLLM_DTYPE="float32",  # no AMX attention (SIGILL on this VM with bfloat16)
        NEURONSERVE_DATA_PARALLEL=str(dp),
        NEURONSERVE_ENGINE_PORT=str(free_port_run(dp)),
    )
    server: Server = start_server(env, work / f"dp{dp}.log")
    try:
        server.wait_ready(300)
        url = f"{server.url}/invocations"
        asyncio.run(drive(url, 4, 8, args.tokens))  # warm both replicas
        out: dict[str, object] = {}
        for level in args.levels:
            rps, spread = asyncio.run(drive(url, level, args.requests, args.tokens))
            out[str(level)] = {"rps": rps, "tokens_per_s": rps * args.tokens, "per_replica": spread}
            print(
                f"DP{dp} c={level}: {rps:.2f} req/s, {rps * args.tokens:.1f} tok/s, spread {spread}",
                flush=True,
            )
        return out
    finally:
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="tiny (the test model) or a model directory")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--levels", default="4,16", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    model = tiny_model_dir() if args.model == "tiny" else Path(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        results = {f"dp{dp}": run_config(dp, model, args, Path(tmp)) for dp in (1, 2)}
    for level in args.levels:
        one = results["dp1"][str(level)]["tokens_per_s"]  # type: ignore[index]
        two = results["dp2"][str(level)]["tokens_per_s"]  # type: ignore[index]
        print(f"c={level}: DP2/DP1 output tokens/s = {two / one:.2f}  ({two:.1f} vs {one:.1f})")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
