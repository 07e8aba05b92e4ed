"""The front's ceiling (not a test, not run by CI): its CPU per request and per token against a bare engine.

One real `neuronserve serve --device neuron` runs a synthetic engine (bench/synth_engine: vLLM's OpenAI
shapes, no model, one SSE event per token as fast as it can). For each work kind, the engine is loaded
directly (its internal port) and through the front (serve's port) in alternating rounds (direct, front,
front, direct) with wrk as the client; each round reads the user + system CPU of the front and engine
processes before and after and divides it by the work wrk got done. A separate prober times /ping on
new connections during the front rounds. The LMI stream needs a serve in the LMI dialect: a second
serve is started for it.

    PYTHONPATH=src:. python bench/bench_ceiling.py [--duration 5] [--connections 32] [--rounds 1]
        [--only openai-stream,tgi-stream,lmi-stream,tgi-plain,openai-plain] [--json FILE] [--wrk PATH]
    PYTHONPATH=src:. python bench/bench_ceiling.py --profile py-spy|cprofile --only tgi-plain
    PYTHONPATH=src:. python bench/bench_ceiling.py --workers-sweep 1,2,4,8 --only tgi-plain --engine-procs 8

docs/PERFORMANCE.md ("Front ceiling") has the results and how to read them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.ceiling import kinds, procs, profiling, report, rounds, serve, wrk


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per round (default 5)")
    p.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    p.add_argument("--threads", type=int, default=1, help="wrk threads (default 1: one core of two)")
    p.add_argument("--rounds", type=int, default=1, help="A-B-B-A cycles per kind (default 1)")
    p.add_argument("--only", help=f"comma-separated kinds: {', '.join(kinds.KINDS)}")
    p.add_argument("--json", type=Path, help="write every round and the summary here")
    p.add_argument("--wrk", help="wrk's path (default: on PATH, else installed by scripts/bench-deps)")
    p.add_argument("--no-ping", action="store_true", help="no /ping prober during the front rounds")
    p.add_argument("--engine-procs", type=int, default=1, help="synthetic engine processes (SO_REUSEPORT)")
    p.add_argument("--engine-access-log", choices=("on", "off"), default="on", help="engine's access lines")
    p.add_argument("--engine-step-ms", type=float, default=0.0, help="engine step (default 0: no pause)")
    p.add_argument("--engine-nice", type=int, help="NEURONSERVE_ENGINE_NICE (default: serve's own)")
    p.add_argument("--profile", choices=("py-spy", "cprofile"), help="profile the front under one kind")
    p.add_argument("--py-spy", help="py-spy's path (default: on PATH, the venv, or scripts/bench-deps')")
    p.add_argument("--profile-out", type=Path, help="keep the raw profile here")
    p.add_argument("--workers-sweep", help="NEURONSERVE_FRONT_WORKERS values, e.g. 1,2,4,8")
    p.add_argument(
        "--front-workers",
        type=int,
        help="NEURONSERVE_FRONT_WORKERS of the serve in the ceiling run (default: its own, auto)",
    )
    args = p.parse_args(argv)
    if args.duration < 1 or args.connections < 1 or args.threads < 1 or args.rounds < 1:
        p.error("--duration, --connections, --threads and --rounds must be at least 1")
    if args.engine_procs < 1:
        p.error("--engine-procs must be at least 1")
    if args.front_workers is not None and args.front_workers < 1:
        p.error("--front-workers must be at least 1")
    kinds.select(args.only)  # an unknown kind stops here, before any server starts
    if args.workers_sweep is not None:
        counts = [x.strip() for x in args.workers_sweep.split(",")]
        if not counts or not all(x.isdecimal() and int(x) >= 1 for x in counts):
            p.error(f"--workers-sweep {args.workers_sweep!r}: a comma-separated list of counts, e.g. 1,2,4,8")
    return args


def machine() -> dict[str, Any]:
    out = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    return {
        "cpus": int(out or os.cpu_count() or 0),
        "load_average": procs.load_average(),
        "python": platform.python_version(),
        "time_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


def options(args: argparse.Namespace, dialect: str, **extra: Any) -> serve.Options:
    return serve.Options(
        dialect=dialect,
        engine_procs=args.engine_procs,
        engine_access_log=args.engine_access_log == "on",
        engine_nice=args.engine_nice,
        engine_step_s=args.engine_step_ms / 1000.0,
        **extra,
    )


def load(args: argparse.Namespace, wrk_path: str, ping: bool | None = None) -> rounds.Load:
    ping = not args.no_ping if ping is None else ping
    return rounds.Load(wrk_path, args.duration, args.connections, args.threads, ping)


def ceiling(args: argparse.Namespace, wrk_path: str, tmp: Path) -> dict[str, Any]:
    selected = kinds.select(args.only)
    done: list[rounds.Round] = []
    for dialect in ("tgi", "lmi"):
        group = [k for k in selected if k.dialect == dialect]
        if not group:
            continue
        server = serve.start(tmp, f"serve-{dialect}", options(args, dialect, workers=args.front_workers))
        try:
            for kind in group:
                done += rounds.abba(kind, server, load(args, wrk_path), tmp, args.rounds)
        finally:
            server.stop()
    rows = report.summary(done)
    report.print_table(rows)
    return {"summary": rows, "rounds": [r.__dict__ for r in done]}


def sweep(args: argparse.Namespace, wrk_path: str, tmp: Path) -> dict[str, Any]:
    counts = [int(x) for x in args.workers_sweep.split(",") if x.strip()]
    selected = kinds.select(args.only or "tgi-plain")
    rows: list[dict[str, Any]] = []
    for n in counts:
        for dialect in ("tgi", "lmi"):
            group = [k for k in selected if k.dialect == dialect]
            if not group:
                continue
            server = serve.start(tmp, f"serve-{dialect}-w{n}", options(args, dialect, workers=n))
            try:
                for kind in group:
                    scripts = {s: rounds.lua(kind, server, s, tmp) for s in ("direct", "front")}
                    samples = {s: rounds.calibrated(kind, server, s) for s in ("direct", "front")}
                    rounds.warm(kind, server, load(args, wrk_path), scripts)
                    for side in ("direct", "front"):
                        r = rounds.measure(
                            kind,
                            side,
                            server,
                            load(args, wrk_path, False),
                            script=scripts[side],
                            sample=samples[side],
                        )
                        unit = r.events if kind.stream else r.requests
                        rows.append(
                            {
                                "workers": n if side == "front" else f"{n} (direct)",
                                "kind": kind.name,
                                "unit": kind.unit,
                                "rps": r.requests / r.duration_s,
                                "eps": r.events / r.duration_s,
                                "front_cpu_us": r.front_cpu_s / unit * 1e6 if unit else float("nan"),
                                "engine_cpu_us": r.engine_cpu_s / unit * 1e6 if unit else float("nan"),
                                "wrk_cpu_share": r.wrk["cpu_share"],
                                "failed": r.wrk["failed"],
                            }
                        )
                        print(f"    workers {n} {kind.name} {side}: {rows[-1]['rps']:.0f} req/s", flush=True)
            finally:
                server.stop()
    report.print_sweep(rows)
    return {"sweep": rows}


def profiled(args: argparse.Namespace, wrk_path: str, tmp: Path) -> dict[str, Any]:
    kind = kinds.select(args.only or "tgi-plain")[0]
    out_dir = args.profile_out or tmp
    out_dir.mkdir(parents=True, exist_ok=True)
    method = args.profile
    spy = profiling.find_py_spy(args.py_spy) if method == "py-spy" else None
    if method == "py-spy" and spy is None:
        print(
            "py-spy not found (pip install py-spy, or scripts/bench-deps py-spy): using cProfile", flush=True
        )
        method = "cprofile"
    text = _profile_once(args, wrk_path, tmp, kind, method=method, spy=spy, out_dir=out_dir)
    if text is None:
        print("py-spy could not record the front (ptrace refused?): using cProfile", flush=True)
        method = "cprofile"
        text = _profile_once(args, wrk_path, tmp, kind, method=method, spy=None, out_dir=out_dir)
    print(
        f"\nprofile of the front, {kind.name}, {args.duration:.0f} s, {args.connections} connections "
        f"({method}):"
    )
    print(text)
    return {"profile": {"kind": kind.name, "method": method, "text": text}}


def _profile_once(
    args: argparse.Namespace,
    wrk_path: str,
    tmp: Path,
    kind: kinds.Kind,
    *,
    method: str,
    spy: str | None,
    out_dir: Path,
) -> str | None:
    stats = out_dir / f"front-{kind.name}.pstats"
    extra = {"cprofile_out": stats} if method == "cprofile" else {}
    server = serve.start(tmp, f"serve-{kind.dialect}-{method}", options(args, kind.dialect, **extra))
    try:
        sample = rounds.calibrated(kind, server, "front")
        script = rounds.lua(kind, server, "front", tmp)
        rounds.warm(
            kind,
            server,
            load(args, wrk_path),
            {"direct": rounds.lua(kind, server, "direct", tmp), "front": script},
        )
        if method == "py-spy" and spy:
            raw = out_dir / f"front-{kind.name}.pyspy.txt"
            recorder = profiling.py_spy_start(spy, server.pid, args.duration, raw)
            r = rounds.measure(
                kind, "front", server, load(args, wrk_path, False), script=script, sample=sample
            )
            log = recorder.communicate(timeout=60)[0].decode(errors="replace")
            if recorder.returncode != 0 or not raw.exists():
                print(log[-1500:], flush=True)
                return None
            text = profiling.report_py_spy(raw, args.duration)
        else:
            os.kill(server.pid, signal.SIGUSR1)
            r = rounds.measure(
                kind, "front", server, load(args, wrk_path, False), script=script, sample=sample
            )
            os.kill(server.pid, signal.SIGUSR2)
            for _ in range(100):
                if stats.exists() and stats.stat().st_size:
                    break
                time.sleep(0.1)
            time.sleep(0.5)  # dump_stats may still be writing
            text = profiling.report_cprofile(stats)
        unit = r.events if kind.stream else r.requests
        head = (
            f"load while recording: {r.requests / r.duration_s:.0f} req/s, front CPU "
            f"{r.front_cpu_s / unit * 1e6:.0f} µs/{kind.unit} (profiler overhead included)\n"
        )
        return head + text
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    wrk_path = wrk.find(args.wrk)
    info = machine()
    print(
        f"machine: {info['cpus']} CPUs, load average {info['load_average'][0]:.2f}, Python {info['python']}, "
        f"{info['time_utc']} UTC; wrk {wrk_path} -t{args.threads} -c{args.connections}, "
        f"{args.duration:.0f} s rounds",
        flush=True,
    )
    if info["load_average"][0] > 0.5 * info["cpus"]:
        print(
            f"NOTE: the machine is busy (load average {info['load_average'][0]:.1f} on {info['cpus']} CPUs): "
            "other work competes with the front and the engine (niced: NEURONSERVE_ENGINE_NICE), so the "
            "throughput ratios are unreliable; CPU per unit of work is less affected",
            flush=True,
        )
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as tmp_name:
        tmp = Path(tmp_name)
        if args.profile:
            doc = profiled(args, wrk_path, tmp)
        elif args.workers_sweep:
            doc = sweep(args, wrk_path, tmp)
        else:
            doc = ceiling(args, wrk_path, tmp)
    info["load_average_end"] = procs.load_average()
    print(f"load average at the end: {info['load_average_end'][0]:.2f}")
    if args.json:
        doc |= {"machine": info, "args": {k: str(v) for k, v in vars(args).items()}}
        args.json.write_text(json.dumps(doc, indent=1, default=str))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
