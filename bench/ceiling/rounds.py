"""One round of load on one side (the engine directly, or through the front), and the sums over rounds.

A round: read the CPU of the front and engine processes, run wrk for the round's seconds (and, on the
front side, the /ping prober beside it), read the CPU again. The work done is counted from wrk's
results: completed requests for short answers; for streams, wrk's bytes divided by one whole
response's bytes (calibrate.py), so a stream cut by the end of the round counts for what it sent.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.ceiling import calibrate, probe, procs, wrk
from bench.ceiling.kinds import Kind
from bench.ceiling.serve import Serve

CONTENDED = 0.15  # other work's CPU, in cores, above which a round is flagged
CLIENT_BOUND = 0.9  # wrk's CPU share of its threads above which the client may be the bottleneck


@dataclass
class Load:
    wrk: str
    seconds: float
    connections: int
    threads: int
    ping: bool = True


@dataclass
class Round:
    kind: str
    side: str  # "direct" or "front"
    requests: float  # work done, in whole responses
    events: float  # token events (for short answers: tokens generated)
    duration_s: float
    front_cpu_s: float
    engine_cpu_s: float
    wrk: dict[str, Any]
    load_average: float = 0.0  # 1-minute load average at the start of the round
    others_cpu_s: float = 0.0  # CPU the rest of the machine used meanwhile (the prober's included)
    ping: dict[str, Any] | None = None


@dataclass
class Side:
    """The sums of one side's rounds of one kind."""

    requests: float = 0.0
    events: float = 0.0
    duration_s: float = 0.0
    front_cpu_s: float = 0.0
    engine_cpu_s: float = 0.0
    wrk_cpu_share: list[float] = field(default_factory=list)
    failed: int = 0
    others: list[float] = field(default_factory=list)  # other work's CPU per round, in cores
    per_round_rps: list[float] = field(default_factory=list)

    def add(self, r: Round) -> None:
        self.requests += r.requests
        self.events += r.events
        self.duration_s += r.duration_s
        self.front_cpu_s += r.front_cpu_s
        self.engine_cpu_s += r.engine_cpu_s
        self.wrk_cpu_share.append(r.wrk["cpu_share"])
        self.failed += r.wrk["failed"]
        self.others.append(r.others_cpu_s / r.wrk["wall_s"] if r.wrk["wall_s"] else 0.0)
        self.per_round_rps.append(r.requests / r.duration_s if r.duration_s else 0.0)

    def per_unit_us(self, cpu_s: float, stream: bool) -> float:
        work = self.events if stream else self.requests
        return cpu_s / work * 1e6 if work else float("nan")

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0

    @property
    def eps(self) -> float:
        return self.events / self.duration_s if self.duration_s else 0.0

    @property
    def contended(self) -> bool:
        return max(self.others, default=0.0) > CONTENDED

    @property
    def client_bound(self) -> bool:
        return max(self.wrk_cpu_share, default=0.0) > CLIENT_BOUND


def calibrated(kind: Kind, serve: Serve, side: str) -> calibrate.Sample:
    """One whole response of this kind on this side; stops the run when it is not what the table claims."""
    port = serve.engine_port if side == "direct" else serve.port
    path = kind.direct_path if side == "direct" else kind.front_path
    body = (kind.direct_body if side == "direct" else kind.front_body)(serve.model)
    sample = calibrate.request(port, path, body)
    want = kind.tokens if kind.stream else 1
    got = sample.events if kind.stream else int(sample.status == 200)
    if sample.status != 200 or got != want:
        raise SystemExit(
            f"{kind.name} {side}: status {sample.status}, {sample.events} events (want {want}):\n"
            f"{sample.body[:600]!r}"
        )
    return sample


def lua(kind: Kind, serve: Serve, side: str, tmp: Path) -> Path:
    body = (kind.direct_body if side == "direct" else kind.front_body)(serve.model)
    return wrk.script(tmp, f"{kind.name}-{side}", body)


def measure(
    kind: Kind, side: str, serve: Serve, load: Load, *, script: Path, sample: calibrate.Sample
) -> Round:
    port = serve.engine_port if side == "direct" else serve.port
    path = kind.direct_path if side == "direct" else kind.front_path
    pinger = probe.start(serve.port, max(0.5, load.seconds - 0.3)) if load.ping and side == "front" else None
    before = procs.cpu(serve.pid)
    busy = procs.machine_busy_s()
    load_average = procs.load_average()[0]
    result = wrk.run(
        load.wrk,
        f"http://127.0.0.1:{port}{path}",
        script,
        seconds=load.seconds,
        connections=load.connections,
        threads=load.threads,
    )
    after = procs.cpu(serve.pid)
    busy = procs.machine_busy_s() - busy
    ping = probe.finish(pinger) if pinger is not None else None
    requests = result.bytes / sample.wire_bytes if kind.stream else float(result.requests)
    summary = asdict(result) | {"cpu_share": result.cpu_share, "failed": result.failed}
    return Round(
        kind=kind.name,
        side=side,
        requests=requests,
        events=requests * kind.tokens,
        duration_s=result.duration_s,
        front_cpu_s=after.front_s - before.front_s,
        engine_cpu_s=after.engine_s - before.engine_s,
        wrk=summary,
        load_average=load_average,
        others_cpu_s=max(
            0.0, busy - result.cpu_s - (after.front_s - before.front_s) - (after.engine_s - before.engine_s)
        ),
        ping=ping,
    )


def warm(kind: Kind, serve: Serve, load: Load, scripts: dict[str, Path]) -> None:
    """A second of load each way: pools, caches and the engine's first responses out of the rounds."""
    for side in ("direct", "front"):
        port = serve.engine_port if side == "direct" else serve.port
        path = kind.direct_path if side == "direct" else kind.front_path
        wrk.run(
            load.wrk,
            f"http://127.0.0.1:{port}{path}",
            scripts[side],
            seconds=1,
            connections=load.connections,
            threads=load.threads,
        )


def abba(kind: Kind, serve: Serve, load: Load, tmp: Path, cycles: int) -> list[Round]:
    """`cycles` times direct, front, front, direct, after a warm-up."""
    samples = {side: calibrated(kind, serve, side) for side in ("direct", "front")}
    scripts = {side: lua(kind, serve, side, tmp) for side in ("direct", "front")}
    warm(kind, serve, load, scripts)
    out = []
    for _ in range(cycles):
        for side in ("direct", "front", "front", "direct"):
            r = measure(kind, side, serve, load, script=scripts[side], sample=samples[side])
            out.append(r)
            ping = f", /ping p99 {r.ping['p99_ms']:.1f} ms" if r.ping else ""
            wall = r.wrk["wall_s"]
            print(
                f"    {kind.name:13} {side:6} {r.requests / r.duration_s:8.0f} req/s "
                f"{r.events / r.duration_s:8.0f} ev/s | CPU busy: front {r.front_cpu_s / wall:4.0%} engine "
                f"{r.engine_cpu_s / wall:4.0%} wrk {r.wrk['cpu_share']:4.0%} | "
                f"others {r.others_cpu_s / wall:4.0%}{ping}",
                flush=True,
            )
    return out
