"""wrk as the load generator: a C client that is not the bottleneck, with a Lua script per POST body.

wrk 4.1.0 (Debian's `wrk` package) keeps `-c` connections busy for `-d` seconds and, through the
script's `done(summary, latency, requests)` hook, reports the requests completed, the bytes read
(partial responses included) and the errors (non-2xx answers count in `errors.status`). Its own CPU
is taken from the kernel's rusage of the child (`os.wait4`), so the benchmark can say when the
client, not the server, was saturated.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEPS = REPO / "scripts" / "bench-deps"
MARK = "WRK_RESULT "
_DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '%s{"requests":%d,"bytes":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,' ..
    '"timeout":%d,"p50_us":%d,"p99_us":%d}\\n', "MARK", summary.requests, summary.bytes,
    summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
""".replace("MARK", MARK)


def find(path: str | None, install: bool = True) -> str:
    """wrk's path: `--wrk PATH`, else on PATH, else installed now by scripts/bench-deps (apt-get)."""
    if path:
        if not os.access(path, os.X_OK):
            raise SystemExit(f"--wrk {path}: not an executable file")
        return path
    found = shutil.which("wrk")
    if found:
        return found
    if install:
        print("wrk not found: installing it with scripts/bench-deps wrk (apt-get install -y wrk)", flush=True)
        if subprocess.run([str(DEPS), "wrk"], check=False).returncode == 0 and shutil.which("wrk"):
            return str(shutil.which("wrk"))
    raise SystemExit(
        "wrk (4.1.0, Debian's `wrk` package) is needed and could not be installed: run "
        "`scripts/bench-deps wrk` as root, or build wrk and pass --wrk PATH"
    )


def script(tmp: Path, name: str, body: dict[str, object], headers: dict[str, str] | None = None) -> Path:
    raw = json.dumps(body)
    lines = ['wrk.method = "POST"', 'wrk.headers["Content-Type"] = "application/json"']
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in (headers or {}).items()]
    lines.append(f"wrk.body = [==[{raw}]==]")
    path = tmp / f"{name}.lua"
    path.write_text("\n".join(lines) + "\n" + _DONE)
    return path


@dataclass
class Result:
    requests: int
    bytes: int
    duration_s: float
    errors: dict[str, int]
    p50_ms: float
    p99_ms: float
    cpu_s: float  # wrk's own user + system time
    wall_s: float
    threads: int

    @property
    def cpu_share(self) -> float:
        """wrk's CPU as a share of what its threads could use (1.0: every thread always busy)."""
        return self.cpu_s / (self.wall_s * self.threads) if self.wall_s else 0.0

    @property
    def failed(self) -> int:
        return sum(self.errors.values())


def run(
    wrk: str, url: str, lua: Path, *, seconds: float, connections: int, threads: int, timeout_s: int = 30
) -> Result:
    argv = [
        wrk,
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        f"--timeout={timeout_s}s",
    ]
    argv += ["-s", str(lua), url]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    line = next((x for x in out.splitlines() if x.startswith(MARK)), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"wrk failed ({proc.returncode}): {' '.join(argv)}\n{out[-2000:]}")
    doc = json.loads(line[len(MARK) :])
    errors = {k: int(doc[k]) for k in ("connect", "read", "write", "status", "timeout")}
    return Result(
        requests=int(doc["requests"]),
        bytes=int(doc["bytes"]),
        duration_s=int(doc["duration_us"]) / 1e6,
        errors=errors,
        p50_ms=int(doc["p50_us"]) / 1e3,
        p99_ms=int(doc["p99_us"]) / 1e3,
        cpu_s=usage.ru_utime + usage.ru_stime,
        wall_s=wall,
        threads=threads,
    )
