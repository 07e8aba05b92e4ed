"""How close a Python front can get to the engine at all, and what each layer of ours adds (not a
test, not run by CI).

Issue 28 asks the front for at most 1.5 times the engine's CPU per non-streamed request and at most
1.0 per OpenAI stream event. Beside the engine and the real front, in one run on one engine, this
measures five relays (bench/ceiling/floor_relay.py): `raw`, the least any relay in Python on uvloop
pays (two parses and the two connections' reads and writes, nothing else); `asgi`, uvicorn with the
front's connection guards and engine client and nothing of its own; `gate`, that inside the front's
real Gate; `gen`, the gate with the front's Generator behind it (TGI-body kinds only); `one`, the
gate's and the generate flow's steps for a non-streamed TGI body written as one coroutine on
uvicorn (tgi-plain only); `oneraw`, the same steps below uvicorn, on a protocol of its own (tgi-plain
only). Rounds go direct, raw, asgi, gate, gen, one, oneraw, front and back, with wrk as
the client. What a layer costs is the step
from one side to the next; docs/PERFORMANCE.md ("How far the front is from the floor") has the
figures.

The raw, asgi and gate relays are given the engine's own body and path (the direct side's); gen,
one, oneraw and the front the client's (bench/ceiling/kinds.py), as in bench_ceiling.py.

    PYTHONPATH=src:. python bench/bench_floor.py [--only tgi-plain,openai-plain,openai-stream]
        [--duration 5] [--rounds 1] [--engine-step-ms 0] [--json FILE]

`--engine-step-ms 20` paces the engine as a Neuron engine streams (one event per stream per step), so
each read of a stream carries one event.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.ceiling import calibrate, kinds, procs, rounds, serve, wrk
from tests.support.server import free_port

RELAY = Path(__file__).resolve().parent / "ceiling" / "floor_relay.py"
SIDES = (
    "direct",
    "raw",
    "asgi",
    "gate",
    "gen",
    "one",
    "oneraw",
    "front",
)  # the engine alone, the relays, the front
CLIENT_SIDES = ("gen", "one", "oneraw", "front")  # given the client's body and path; the others the engine's
Relays = dict[str, tuple[subprocess.Popen[bytes], int]]  # mode -> (process, port)


def sides(kind: kinds.Kind) -> tuple[str, ...]:
    """`gen` serves only the generate schema: the kinds whose client sends a TGI body; `one` and
    `oneraw` only the non-streamed one."""
    tgi = kind.name.startswith("tgi-")
    plain_tgi = tgi and not kind.stream
    return tuple(s for s in SIDES if (s != "gen" or tgi) and (s not in ("one", "oneraw") or plain_tgi))


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per round (default 5)")
    p.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    p.add_argument("--rounds", type=int, default=1, help="cycles per kind (default 1)")
    p.add_argument(
        "--only", default="tgi-plain,openai-stream", help="kinds (default tgi-plain,openai-stream)"
    )
    p.add_argument("--json", type=Path, help="write every round and the summary here")
    p.add_argument("--wrk", help="wrk's path (default: on PATH, else installed by scripts/bench-deps)")
    p.add_argument("--engine-step-ms", type=float, default=0.0, help="engine step (default 0: no pause)")
    return p.parse_args(argv)


def target(kind: kinds.Kind, side: str, srv: serve.Serve, relays: Relays) -> tuple[int, str, str]:
    """Where a side's load goes (port, path) and which body it sends ("front": the client's, "direct":
    the engine's)."""
    port = relays[side][1] if side in relays else {"direct": srv.engine_port, "front": srv.port}[side]
    body = "front" if side in CLIENT_SIDES else "direct"
    return port, kind.front_path if body == "front" else kind.direct_path, body


def start_relay(
    engine_port: int, mode: str, tmp: Path, model: str = "", skip: str = ""
) -> tuple[subprocess.Popen[bytes], int]:
    """The relay on a free port, its output (the gate's access lines) to a file as the serve's goes.
    `skip`: the one-piece relay's FLOOR_ONE_SKIP (bench_steps.py)."""
    port = free_port()
    env = {**os.environ, "FLOOR_ONE_SKIP": skip}
    with (tmp / f"relay-{mode}{'-' + skip if skip else ''}.log").open("ab") as out:
        relay = subprocess.Popen(
            [sys.executable, str(RELAY), str(port), str(engine_port), mode, model],
            stdout=out,
            stderr=out,
            env=env,
        )
    wait_listening(relay, port, f"the {mode} relay")
    return relay, port


def wait_listening(proc: subprocess.Popen[bytes], port: int, what: str, timeout_s: float = 20) -> None:
    """Until `proc` accepts connections on `port`; SystemExit when it exits or takes too long."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"{what} did not listen on :{port}") from None
            time.sleep(0.05)


def one_round(
    kind: kinds.Kind,
    side: str,
    srv: serve.Serve,
    relays: Relays,
    args: argparse.Namespace,
    *,
    scripts: dict[str, Path],
    samples: dict[str, calibrate.Sample],
    wrk_path: str,
) -> dict[str, Any]:
    port, path, body = target(kind, side, srv, relays)
    script, sample = scripts[body], samples[body]
    before, busy = procs.cpu(srv.pid), procs.machine_busy_s()
    relay_before = {m: procs.cpu_of(r[0].pid) for m, r in relays.items()}
    result = wrk.run(
        wrk_path,
        f"http://127.0.0.1:{port}{path}",
        script,
        seconds=args.duration,
        connections=args.connections,
        threads=1,
    )
    after, busy = procs.cpu(srv.pid), procs.machine_busy_s() - busy
    relay_after = {m: procs.cpu_of(r[0].pid) for m, r in relays.items()}
    work = result.bytes / sample.wire_bytes * kind.tokens if kind.stream else float(result.requests)
    spent = {
        "engine": after.engine_s - before.engine_s,
        "front": after.front_s - before.front_s,
        **{m: relay_after[m] - relay_before[m] for m in relays},
    }
    others = busy - result.cpu_s - sum(spent.values())
    return {
        "kind": kind.name,
        "side": side,
        "work": work,
        "seconds": result.duration_s,
        "failed": result.failed,
        "cpu_s": spent,
        "wrk_cpu_share": result.cpu_share,
        "others_cores": max(0.0, others) / result.wall_s,
    }


def summary(done: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for name in dict.fromkeys(r["kind"] for r in done):
        mine = [r for r in done if r["kind"] == name]
        unit = "event" if kinds.KINDS[name].stream else "request"

        def per(side: str, proc: str, rs: list[dict[str, Any]] = mine) -> float:
            sel = [r for r in rs if r["side"] == side]
            work = sum(r["work"] for r in sel)
            return sum(r["cpu_s"][proc] for r in sel) / work * 1e6 if work else float("nan")

        def rate(side: str, rs: list[dict[str, Any]] = mine) -> float:
            sel = [r for r in rs if r["side"] == side]
            return float(sum(r["work"] for r in sel) / sum(r["seconds"] for r in sel))

        engine = per("direct", "engine")
        row = {"kind": name, "unit": unit, "engine_us": engine, "direct_rate": rate("direct")}
        for side in sides(kinds.KINDS[name])[1:]:
            row |= {
                f"{side}_us": per(side, side),
                f"{side}_ratio": per(side, side) / engine,
                f"{side}_rate": rate(side),
            }
        row |= {"failed": sum(r["failed"] for r in mine), "others_max": max(r["others_cores"] for r in mine)}
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    selected = kinds.select(args.only)
    if any(k.dialect != "tgi" for k in selected):
        raise SystemExit("--only: the floor is measured on the TGI serve's kinds (not lmi-stream)")
    wrk_path = wrk.find(args.wrk)
    done: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp_name:
        tmp = Path(tmp_name)
        srv = serve.start(tmp, "serve-tgi", serve.Options(engine_step_s=args.engine_step_ms / 1000.0))
        relays = {mode: start_relay(srv.engine_port, mode, tmp, srv.model) for mode in SIDES[1:-1]}
        try:
            for kind in selected:
                samples = {s: rounds.calibrated(kind, srv, s) for s in ("direct", "front")}
                scripts = {s: rounds.lua(kind, srv, s, tmp) for s in ("direct", "front")}
                for side in sides(kind):  # warm-up: pools and the engine's first answers
                    port, path, body = target(kind, side, srv, relays)
                    wrk.run(
                        wrk_path,
                        f"http://127.0.0.1:{port}{path}",
                        scripts[body],
                        seconds=1,
                        connections=args.connections,
                        threads=1,
                    )
                for _ in range(args.rounds):
                    for side in (*sides(kind), *reversed(sides(kind))):
                        r = one_round(
                            kind, side, srv, relays, args, scripts=scripts, samples=samples, wrk_path=wrk_path
                        )
                        done.append(r)
                        rate = r["work"] / r["seconds"]
                        print(
                            f"    {kind.name:13} {side:6} {rate:9.0f} {kinds.KINDS[kind.name].unit}s/s"
                            f" | cpu s: {r['cpu_s']} | others {r['others_cores']:.2f}",
                            flush=True,
                        )
        finally:
            for proc, _ in relays.values():
                proc.terminate()
                proc.wait()
            srv.stop()
    rows = summary(done)
    print("\nCPU per unit (µs) and its ratio to the bare engine's, per side; then each side's rate, in order")
    for r in rows:
        mine = sides(kinds.KINDS[r["kind"]])
        cells = "  ".join(f"{s} {r[f'{s}_us']:.1f} ({r[f'{s}_ratio']:.2f})" for s in mine[1:])
        rates = " / ".join(f"{r[f'{s}_rate']:.0f}" for s in mine)
        print(
            f"{r['kind']:14} engine {r['engine_us']:.1f}  {cells} | {rates} {r['unit']}s/s;"
            f" failed {r['failed']}, others ≤ {r['others_max']:.2f} cores"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "time_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                    "summary": rows,
                    "rounds": done,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
