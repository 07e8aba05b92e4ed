"""The ceiling table (the issue's columns), the details behind it, and the JSON document."""

from __future__ import annotations

import math
from typing import Any

from bench.ceiling import probe
from bench.ceiling.kinds import KINDS
from bench.ceiling.rounds import Round, Side


def sides(rounds: list[Round]) -> dict[str, dict[str, Side]]:
    out: dict[str, dict[str, Side]] = {}
    for r in rounds:
        out.setdefault(r.kind, {"direct": Side(), "front": Side()})[r.side].add(r)
    return out


def _fmt(x: float, unit: str = "") -> str:
    return "-" if math.isnan(x) else f"{x:.0f}{unit}" if x >= 10 else f"{x:.1f}{unit}"


def summary(rounds: list[Round]) -> list[dict[str, Any]]:
    rows = []
    for name, s in sides(rounds).items():
        kind = KINDS[name]
        d, f = s["direct"], s["front"]
        engine_us = d.per_unit_us(d.engine_cpu_s, kind.stream)
        front_us = f.per_unit_us(f.front_cpu_s, kind.stream)
        pings = [r.ping for r in rounds if r.kind == name and r.ping]
        rows.append(
            {
                "kind": name,
                "label": kind.label,
                "unit": kind.unit,
                "bare_engine_cpu_us": engine_us,
                "front_cpu_us": front_us,
                "front_over_engine": front_us / engine_us if engine_us else float("nan"),
                "throughput_front_over_direct": f.rps / d.rps if d.rps else float("nan"),
                "engine_cpu_us_in_front_rounds": f.per_unit_us(f.engine_cpu_s, kind.stream),
                "front_cpu_us_in_direct_rounds": d.per_unit_us(d.front_cpu_s, kind.stream),
                "direct_rps": d.rps,
                "front_rps": f.rps,
                "direct_eps": d.eps,
                "front_eps": f.eps,
                "direct_per_round_rps": d.per_round_rps,
                "front_per_round_rps": f.per_round_rps,
                "wrk_cpu_share_direct": max(d.wrk_cpu_share, default=0.0),
                "wrk_cpu_share_front": max(f.wrk_cpu_share, default=0.0),
                "client_bound": d.client_bound or f.client_bound,
                "others_cores_max": max(d.others + f.others, default=0.0),
                "contended": d.contended or f.contended,
                "failed": d.failed + f.failed,
                "ping": probe.merge(pings) if pings else None,
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print("\n| work | bare engine CPU | front CPU | front ÷ engine | throughput via front ÷ direct |")
    print("|---|---|---|---|---|")
    for r in rows:
        unit = f" µs/{r['unit']}"
        print(
            f"| {r['label']} | {_fmt(r['bare_engine_cpu_us'], unit)} | {_fmt(r['front_cpu_us'], unit)} | "
            f"{r['front_over_engine']:.2f} | {r['throughput_front_over_direct']:.2f} |"
        )
    print(
        "\n| work | req/s direct / front | events/s direct / front | engine CPU in front rounds | "
        "front CPU in direct rounds | wrk CPU direct / front | failed |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        unit = f" µs/{r['unit']}"
        flag = " (client-bound)" if r["client_bound"] else ""
        print(
            f"| {r['kind']} | {r['direct_rps']:.0f} / {r['front_rps']:.0f} | {r['direct_eps']:.0f} / "
            f"{r['front_eps']:.0f} | {_fmt(r['engine_cpu_us_in_front_rounds'], unit)} | "
            f"{_fmt(r['front_cpu_us_in_direct_rounds'], unit)} | {r['wrk_cpu_share_direct']:.0%} / "
            f"{r['wrk_cpu_share_front']:.0%}{flag} | {r['failed']} |"
        )
    pings = [r for r in rows if r["ping"]]
    if pings:
        worst = max(pings, key=lambda r: r["ping"]["p99_ms"])
        print(
            "\n/ping under load (new connection each, every 25 ms, during the front rounds): "
            + "; ".join(
                f"{r['kind']} p50 {r['ping']['p50_ms']:.1f} / p99 {r['ping']['p99_ms']:.1f} / max "
                f"{r['ping']['max_ms']:.1f} ms ({r['ping']['n']} pings, {r['ping']['failed']} failed)"
                for r in pings
            )
        )
        print(f"/ping p99, worst kind: {worst['ping']['p99_ms']:.1f} ms ({worst['kind']})")
    for r in rows:
        if r["client_bound"]:
            print(
                f"NOTE {r['kind']}: wrk used more than 90% of its threads' CPU: "
                "the client may be the bottleneck"
            )
        if r["contended"]:
            print(
                f"NOTE {r['kind']}: other work on the machine took up to {r['others_cores_max']:.2f} cores "
                "in a round: its throughput ratio is unreliable (CPU per unit less so)"
            )
        if r["failed"]:
            print(f"NOTE {r['kind']}: {r['failed']} failed requests (non-2xx or socket errors) in the rounds")


def print_sweep(rows: list[dict[str, Any]]) -> None:
    print(
        "\n| NEURONSERVE_FRONT_WORKERS | work | req/s | events/s | front CPU | engine CPU | wrk CPU "
        "| failed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        unit = f" µs/{r['unit']}"
        print(
            f"| {r['workers']} | {r['kind']} | {r['rps']:.0f} | {r['eps']:.0f} | "
            f"{_fmt(r['front_cpu_us'], unit)} | {_fmt(r['engine_cpu_us'], unit)} | "
            f"{r['wrk_cpu_share']:.0%} | {r['failed']} |"
        )
