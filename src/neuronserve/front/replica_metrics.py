"""/metrics with several replicas: every replica's engine metrics with a `replica` label, merged into
one valid Prometheus text exposition, plus the front's own per-replica counts (the router serves them
after the front's series, front/metrics.py).

Why merge instead of concatenating: the text format wants each metric family once (its HELP/TYPE,
then all its samples); N copies of `vllm:num_requests_running` would be rejected by strict scrapers.
A replica that does not answer is left out (its `neuronserve_replica_ready` says 0), so one dead engine
never fails the scrape.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from neuronserve.engine.pool import RPhase

if TYPE_CHECKING:
    from neuronserve.front.router import Replica

_HEADER = re.compile(r"^# (HELP|TYPE) (\S+)")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*?\})?(\s.*)$")


def label(line: str, replica: int) -> str:
    """One sample line with `replica="<i>"` as its first label."""
    m = _SAMPLE.match(line)
    if not m:
        return line
    name, labels, rest = m.groups()
    inner = labels[1:-1] if labels else ""
    joined = f'replica="{replica}"' + (f",{inner}" if inner else "")
    return f"{name}{{{joined}}}{rest}"


def merge(texts: dict[int, str]) -> str:
    """Families in order of first appearance; headers once; each replica's samples labelled."""
    headers: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for replica, text in sorted(texts.items()):
        family = ""
        for line in text.splitlines():
            if not line.strip():
                continue
            h = _HEADER.match(line)
            if h:
                family = h.group(2)
                seen = headers.setdefault(family, [])
                samples.setdefault(family, [])
                if not any(x.startswith(f"# {h.group(1)} ") for x in seen):
                    seen.append(line)
            elif not line.startswith("#"):
                samples.setdefault(family, []).append(label(line, replica))
                headers.setdefault(family, [])
    out: list[str] = []
    for family, head in headers.items():
        out += head
        out += samples[family]
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class ReplicaCounts:
    """The front's own counts of one replica (summed over the front processes when there are several)."""

    index: int
    routed: int
    outstanding: int
    restarts: int
    ready: bool


def counts_of(replicas: Sequence[Replica]) -> list[ReplicaCounts]:
    """One process's counts, read from its replica objects."""
    return [
        ReplicaCounts(r.index, r.routed, r.outstanding, r.restarts, r.phase == RPhase.READY) for r in replicas
    ]


def front_counts(rows: Sequence[ReplicaCounts]) -> str:
    families = [
        (
            "neuronserve_replica_requests_total",
            "counter",
            "Requests the front routed to the replica",
            "routed",
        ),
        (
            "neuronserve_replica_outstanding",
            "gauge",
            "Requests routed to the replica and not finished",
            "outstanding",
        ),
        (
            "neuronserve_replica_restarts_total",
            "counter",
            "Times the replica's engine was restarted",
            "restarts",
        ),
        ("neuronserve_replica_ready", "gauge", "1 when the replica takes requests", "ready"),
    ]
    out: list[str] = []
    for name, kind, text, attr in families:
        out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        out += [f'{name}{{replica="{r.index}"}} {int(getattr(r, attr))}' for r in rows]
    return "\n".join(out) + "\n"
