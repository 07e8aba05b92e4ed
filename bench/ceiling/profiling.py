"""Where the front's CPU goes under one kind of load: py-spy (sampling, every thread) or cProfile.

py-spy (`pip install py-spy`, or scripts/bench-deps py-spy) attaches to the running front with
`record --nonblocking --gil --threads --subprocesses --format raw`; the raw output (one collapsed stack
and its sample count per line) is folded here into self and cumulative shares per function. `--gil`
keeps only the thread holding the GIL: without it, a thread waiting for the GIL (the engine-log relay
under load) counts as busy, and the shares overstate it; what runs with the GIL released (a socket
send, a pipe read) is left out. When py-spy
is missing or cannot attach (no ptrace), the front is started under bench/ceiling/profiled_serve.py,
which records with cProfile between two signals.
"""

from __future__ import annotations

import io
import os
import pstats
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ENGINE_MODULE = "vllm.entrypoints.openai.api_server"
_LINE = re.compile(r":\d+\)$")
CACHE_BIN = (
    Path(os.environ.get("NEURONSERVE_CACHE_HOME", Path.home() / ".cache" / "neuronserve")) / "py-spy" / "bin"
)


def find_py_spy(path: str | None) -> str | None:
    if path:
        return path
    for candidate in (shutil.which("py-spy"), Path(sys.executable).with_name("py-spy"), CACHE_BIN / "py-spy"):
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def py_spy_start(
    py_spy: str, pid: int, seconds: float, out: Path, rate: int = 250
) -> subprocess.Popen[bytes]:
    argv = [
        py_spy,
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(max(1, round(seconds))),
        "--rate",
        str(rate),
    ]
    argv += ["--nonblocking", "--gil", "--threads", "--subprocesses", "--format", "raw", "--output", str(out)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _frame(raw: str) -> str:
    return _LINE.sub(")", raw.strip())


def _package(frame: str) -> str:
    """`func (neuronserve/front/app.py)` -> `neuronserve.front`; the event loop's own C code (uvloop, the
    sockets) shows as self time of `Runner.run`, the last Python frame below it."""
    where = frame[frame.rfind("(") + 1 : -1]
    if frame.startswith("Runner.run "):
        return "event loop (uvloop, C)"
    parts = where.split("/")
    if parts[0] == "neuronserve" and len(parts) > 2:
        return ".".join(parts[:2])
    return parts[0] if len(parts) > 1 else where


def fold(raw_text: str) -> tuple[int, Counter[str], Counter[str], Counter[str]]:
    """(samples, self counts, cumulative counts, samples per thread) from py-spy's raw output.

    `--subprocesses` follows the front's children too: a stack under an engine's process frame
    (`process PID:"... vllm.entrypoints.openai.api_server ..."`) is the engine's, not the front's, and
    is left out; the front's own children (workers) stay in."""
    total = 0
    own: Counter[str] = Counter()
    cumulative: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    for line in raw_text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdecimal():
            continue
        n = int(count)
        frames = [f for f in stack.split(";") if f]
        if any(f.startswith("process ") and ENGINE_MODULE in f for f in frames):
            continue
        thread = next((f for f in frames if f.startswith("thread (")), "thread (?)")
        frames = [_frame(f) for f in frames if not f.startswith(("process ", "thread ("))]
        if not frames:
            continue
        total += n
        threads[thread] += n
        own[frames[-1]] += n
        for f in set(frames):
            cumulative[f] += n
    return total, own, cumulative, threads


def report_py_spy(raw_path: Path, seconds: float, rate: int = 250, top: int = 25) -> str:
    total, own, cumulative, threads = fold(raw_path.read_text(errors="replace"))
    if not total:
        return "py-spy recorded no samples"
    out = io.StringIO()
    busy = total / (seconds * rate)
    out.write(
        f"py-spy: {total} samples holding the GIL in {seconds:.0f} s at {rate}/s (the GIL held ~{busy:.0%} "
        "of the time)\n"
    )
    out.write(
        "samples by thread: " + ", ".join(f"{t} {n / total:.0%}" for t, n in threads.most_common(6)) + "\n"
    )
    packages: Counter[str] = Counter()
    for name, n in own.items():
        packages[_package(name)] += n
    out.write("self samples by package: ")
    out.write(", ".join(f"{p} {n / total:.0%}" for p, n in packages.most_common(12)) + "\n")
    out.write(f"\ntop {top} by self samples:\n")
    for name, n in own.most_common(top):
        out.write(f"  {n / total:6.1%}  {name}\n")
    out.write(f"\ntop {top} by cumulative samples:\n")
    for name, n in cumulative.most_common(top):
        out.write(f"  {n / total:6.1%}  {name}\n")
    return out.getvalue()


def report_cprofile(stats_path: Path, top: int = 25) -> str:
    out = io.StringIO()
    stats = pstats.Stats(str(stats_path), stream=out)
    stats.strip_dirs()
    out.write(f"cProfile (front's event-loop thread): {stats.total_calls} calls, {stats.total_tt:.2f} s\n")  # type: ignore[attr-defined]
    out.write(f"\ntop {top} by self time (tottime):\n")
    stats.sort_stats("tottime").print_stats(top)
    out.write(f"\ntop {top} by cumulative time:\n")
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()
