"""Mutation testing of the pure and protocol modules with mutmut, bounded in time; see scripts/mutation.

Why mutation testing: a test suite can pass whatever the code does (the first run found four such tests).
mutmut changes the code one small edit at a time (a `<` for a `<=`, a string emptied, a call's
argument dropped) and runs the tests that cover the changed function; a mutant no test notices
"survived", and each survivor is either a missing test or an edit that changes nothing observable.

The checkout is never touched: the tree is copied into a work directory (outside it, so the venv key
and `git status` stay as they are), mutmut is configured there with a setup.cfg and run module by
module, each under its share of the time budget. Results are read from mutmut's own result files.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The modules measured: the pure plan (every module of plan/), the settings table and its parsers, the
# host readers that feed the plan, the TGI/LMI translation and the front's request checks, the SSE parser,
# the stage's paths, manifest and atomic modules, and the deploy stream client. The plan and protocol ones
# carry the 90 % goal. Modules not (yet) in the tree are skipped.
MODULES = (  # small and fast first: time a module leaves unused passes on to the next ones
    "front/sse.py",
    "deploy/stream.py",
    "plan/cachekey.py",
    "plan/lanes/nxdi/intree.py",
    "launchplan.py",
    "host/properties.py",
    "host/versions.py",
    "plan/facts.py",
    "front/schema.py",
    "stage/paths.py",
    "stage/manifest.py",
    "stage/atomic.py",
    "front/lmi.py",
    "front/tgi.py",
    "front/dialect.py",
    "front/completion_reader.py",
    "front/checks.py",
    "front/genparams.py",
    "config/values.py",
    "config/origin.py",
    "config/compat.py",
    "config/settings.py",
    "plan/lanes/nxdi/derive.py",
    "plan/lanes/nxdi/kv.py",
    "plan/lanes/nxdi/overrides.py",
    "plan/fit/instances.py",
    "plan/replicas.py",
    "plan/fit/recommend.py",
    "plan/fit/memory.py",
    "plan/resolution.py",
    "plan/lanes/nxdi/launch.py",
    "plan/lanes/nxdi/rules.py",
    "plan/build.py",
    "plan/model.py",
    "plan/command.py",
    "plan/lanes/sampling.py",
    "plan/fit/check.py",
    "host/devices.py",
    "host/modelfiles.py",
    "host/facts.py",
    "plan/lanes/nxdi/engine.py",
    "plan/lanes/nxdi/steps.py",
)
# What CI may run (scripts/test, NEURONSERVE_MUTATION_SAMPLE=1): two small protocol modules, ~1 minute.
SAMPLE = ("front/sse.py", "deploy/stream.py")
# The tests mutmut may run; it maps each test to the functions it calls and runs only those per mutant.
# Pure and fast: no engine, no S3 server (stream reassembly reads recordings).
TESTS = (
    "tests/unit",
    "tests/deploy/test_stream.py",
    "tests/deploy/test_stream_edges.py",
    "tests/deploy/test_stream_errors.py",
)
# Not mutation-relevant and not runnable here: it checks the engine's nice against the test process's
# own, which this script raises to 19.
IGNORE = ("tests/unit/engine/test_process.py",)
SKIP = {".git", "mutants", ".venv", "venv", "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
KILLED = {"killed", "timeout", "caught by type check", "segfault"}


@dataclass
class Score:
    module: str
    status: dict[str, str] = field(default_factory=dict)  # mutant name -> mutmut status
    seconds: float = 0.0
    stopped: bool = False  # the time budget ran out before every mutant was checked

    def count(self, *statuses: str) -> int:
        return sum(1 for s in self.status.values() if s in statuses)

    @property
    def killed(self) -> int:
        return self.count(*KILLED)

    @property
    def survived(self) -> list[str]:
        """Mutants no test noticed, including those no selected test even runs ("no tests")."""
        return sorted(n for n, s in self.status.items() if s in ("survived", "no tests"))

    @property
    def checked(self) -> int:
        return self.killed + len(self.survived)

    @property
    def score(self) -> float | None:
        return 100.0 * self.killed / self.checked if self.checked else None


def prepare(work: Path, modules: list[str]) -> None:
    """A fresh copy of the tree and a setup.cfg that mutates only `modules`."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", *SKIP)
    top = sorted(p.name for p in ROOT.iterdir() if p.name not in SKIP)
    for name in top:  # the whole tree: some tests read the README, docker/, sagemaker/
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(src, work / name)
    also = "\n".join(f"    {name}" for name in top if name not in ("src", "tests", "pyproject.toml"))
    only = "\n".join(f"    src/neuronserve/{m}" for m in modules)
    tests = "\n".join(f"    {t}" for t in TESTS)
    (work / "setup.cfg").write_text(
        "[mutmut]\n"
        "source_paths=src/neuronserve\n"
        f"only_mutate=\n{only}\n"
        f"pytest_add_cli_args_test_selection=\n{tests}\n"
        f"also_copy=\n{also}\n"
        "pytest_add_cli_args=\n    -p\n    no:cacheprovider\n    -q\n"
        + "".join(f"    --ignore={path}\n" for path in IGNORE)
        + "use_git_change_detection=false\n"
    )


def dotted(module: str) -> str:
    return "neuronserve." + module.removesuffix(".py").replace("/", ".")


def run_module(work: Path, module: str, seconds: float, children: int, log: Path) -> Score:
    """`mutmut run` for one module's mutants, stopped (SIGINT: mutmut saves what it has) at `seconds`."""
    score = Score(module)
    start = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(work / "src")}
    with log.open("ab") as out:
        out.write(f"\n== {module} (budget {seconds:.0f} s)\n".encode())
        out.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(children), f"{dotted(module)}.*"],
            cwd=work,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # nice 19 alone does not yield to other sessions: with sched_autogroup (on by default on many
        # kernels, this machine's included) the CPU is shared between sessions first and nice only
        # ranks processes within one (sched(7), "The autogroup feature"). mutmut has its own session,
        # so its autogroup is niced too. Best effort: without autogroups the plain nice still applies.
        with contextlib.suppress(OSError), open(f"/proc/{proc.pid}/autogroup", "w") as f:
            f.write("19")
        try:
            proc.wait(timeout=max(1.0, seconds))
        except subprocess.TimeoutExpired:
            score.stopped = True
            _stop(proc)
        except BaseException:  # Ctrl-C or SIGTERM here: mutmut and its workers go too
            _stop(proc)
            raise
    score.seconds = time.monotonic() - start
    score.status = read_status(work, module)
    return score


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT: mutmut stops its workers and keeps the results it has; SIGKILL if it does not end."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def read_status(work: Path, module: str) -> dict[str, str]:
    """Each mutant's status, from mutmut's result file of the module (mutants/<path>.meta)."""
    from mutmut.stats import status_by_exit_code  # noqa: PLC0415 (the venv's mutmut, only here)

    meta = work / "mutants" / "src" / "neuronserve" / f"{module}.meta"
    if not meta.exists():
        return {}
    codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
    return {name: status_by_exit_code[code] for name, code in codes.items()}


def diff(work: Path, name: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(work / "src")}
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "show", name],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return out.stdout


def table(scores: list[Score]) -> str:
    rows = [
        "| module | mutants | killed | survived | not checked | score |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s in scores:
        pct = f"{s.score:.1f} %" if s.score is not None else "-"
        unchecked = len(s.status) - s.checked
        rows.append(
            f"| {s.module} | {len(s.status)} | {s.killed} | {len(s.survived)} | {unchecked} | {pct} |"
        )
    return "\n".join(rows)


def _terminate(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    ap = argparse.ArgumentParser(prog="scripts/mutation", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "modules", nargs="*", help=f"paths under src/neuronserve (default: {len(MODULES)} modules)"
    )
    ap.add_argument("--max-seconds", type=float, default=2700, help="time budget for the whole run")
    ap.add_argument("--sample", action="store_true", help=f"only {', '.join(SAMPLE)} (what CI may run)")
    ap.add_argument("--children", type=int, default=2, help="mutmut workers (default 2)")
    ap.add_argument(
        "--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "neuronserve-mutation"
    )
    ap.add_argument("--json", type=Path, help="write the scores and survivors as JSON here")
    ap.add_argument("--diffs", action="store_true", help="print each surviving mutant's diff")
    ap.add_argument("--min-score", type=float, default=0.0, help="exit 1 when a module scores below this")
    args = ap.parse_args(argv)
    modules = list(SAMPLE if args.sample else (args.modules or MODULES))
    modules = [m for m in modules if (ROOT / "src" / "neuronserve" / m).exists()]
    missing = sorted(set(args.modules) - set(modules))
    if missing:
        ap.error(f"no such module under src/neuronserve: {', '.join(missing)}")
    prepare(args.work, modules)
    log = args.work / "mutmut.log"
    deadline = time.monotonic() + args.max_seconds
    scores: list[Score] = []
    for n, module in enumerate(modules):
        share = (deadline - time.monotonic()) / (len(modules) - n)  # unused time passes on
        score = run_module(args.work, module, share, args.children, log)
        scores.append(score)
        pct = f"{score.score:.1f} %" if score.score is not None else "-"
        stop = " (budget reached: stopped)" if score.stopped else ""
        print(
            f"{module}: {score.killed}/{score.checked} killed, {pct}, {len(score.status)} mutants, "
            f"{score.seconds:.0f} s{stop}",
            flush=True,
        )
    print()
    print(table(scores))
    print()
    for s in scores:
        for name in s.survived:
            print(f"survived: {name}" + (" (no test runs it)" if s.status[name] == "no tests" else ""))
            if args.diffs:
                print(diff(args.work, name))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "modules": {
                        s.module: {
                            "mutants": len(s.status),
                            "killed": s.killed,
                            "survived": s.survived,
                            "checked": s.checked,
                            "score": s.score,
                            "seconds": round(s.seconds, 1),
                            "stopped": s.stopped,
                        }
                        for s in scores
                    }
                },
                indent=2,
            )
        )
    print(f"mutmut output: {log}")
    low = [s.module for s in scores if s.score is not None and s.score < args.min_score]
    if low:
        print(f"below {args.min_score:.0f} %: {', '.join(low)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
