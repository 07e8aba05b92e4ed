"""The front's own Prometheus metrics, served on /metrics ahead of the engine's (relayed) metrics.

Why the front counts for itself: the engine never sees what the front refuses (429 at the
concurrency limit, 413 payloads, 503 while loading or draining, 404 routes) nor staging and the
compile cache, so an operator could not alert on them from the engine's metrics alone.

Why a registry per app (not prometheus_client's global one): tests build several apps in one
process, and the engine's metrics must never be mixed into ours by accident. Every series carries
`BASE_LABELS` first (none today); a per-replica `replica` label is added there, in one place.

Phase and in-flight are read at scrape time from the live state (a custom collector), so nothing on
the request path has to remember to update them.

Several front processes (NEURONSERVE_FRONT_WORKERS > 1): prometheus_client's multiprocess mode, each
process writing its series to files in a private directory (serve/workers.py makes it at start and
removes it at stop) and /metrics merging them, so counters and histograms are summed over the workers
and the supervisor (staging, cache events, engine starts). The gauges name how they merge (the last
staging step's seconds and build_info: their maximum). Phase and in-flight stay read at scrape time:
the phase is the supervisor's (on the board) and the in-flight count is the container's own (the
shared limiter), exact without a per-request gauge update, and with nothing left behind by a dead worker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from neuronserve.front.errors import REJECTED_REASONS
from neuronserve.front.routes import ALLOWED
from neuronserve.front.state import Phase, ServerState

log = logging.getLogger("neuronserve.front")

BASE_LABELS: tuple[str, ...] = ()  # e.g. ("replica",) once the front routes to several engines
REJECT_REASONS = ("limit", "payload", "draining", "not_ready", "bad_request", "not_found")
CACHE_EVENTS = ("hit", "miss", "publish_ok", "publish_failed", "corrupt")
STAGE_KINDS = ("model", "artifacts")
WORKER_RESTART_REASONS = ("exited", "stuck")  # serve/workers.py: a front worker replaced, and why
# neuronserve_build_info (lane: plan/lanes/registry.py)
BUILD_LABELS = ("version", "vllm", "plugin", "sdk", "lane")
ENGINE_SCRAPE_TIMEOUT_S = 1.0  # a saturated engine may answer /metrics late: never hold a scrape longer
# Latency buckets from 5 ms (a refusal) to 10 minutes (SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS' default).
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def route_label(path: str) -> str:
    """The path itself when allowed (a small fixed set), else "other": label values stay bounded."""
    return path if path in ALLOWED else "other"


def reason_for(status: int) -> str | None:
    """The rejected reason a handler's refusal with `status` is counted under (errors.STATUSES)."""
    return REJECTED_REASONS.get(status)


class _LiveState(Collector):
    def __init__(self, state: ServerState, in_flight: Callable[[], int]) -> None:
        self._state = state
        self._in_flight = in_flight

    def collect(self) -> Iterable[Metric]:
        phase = GaugeMetricFamily("neuronserve_phase", "1 for the server's current phase", labels=["phase"])
        current = self._state.phase
        for p in Phase:
            phase.add_metric([str(p)], 1.0 if p == current else 0.0)
        yield phase
        yield GaugeMetricFamily(
            "neuronserve_in_flight",
            "Sequences in flight through the front (a request counts its prompts x n/best_of)",
            value=float(self._in_flight()),
        )


class FrontMetrics:
    """Every series of the front. Methods are thread-safe (staging reports from its own thread)."""

    def __init__(
        self,
        state: ServerState,
        in_flight: Callable[[], int],
        build: Mapping[str, str],
        multiprocess_dir: str | None = None,
    ) -> None:
        reg = self.registry = CollectorRegistry(auto_describe=False)
        if multiprocess_dir is not None:
            reg = _multiprocess(self.registry, multiprocess_dir)  # the series' values: files merged on scrape
        req = (*BASE_LABELS, "route", "schema")
        self.requests = Counter(
            "neuronserve_requests", "Requests answered by the front", (*req, "status"), registry=reg
        )
        self.duration = Histogram(
            "neuronserve_request_duration_seconds",
            "Request time to the last byte",
            req,
            buckets=BUCKETS,
            registry=reg,
        )
        self.ttfb = Histogram(
            "neuronserve_time_to_first_byte_seconds",
            "Request time to the first body byte (a stream's first event)",
            req,
            buckets=BUCKETS,
            registry=reg,
        )
        self.rejected = Counter(
            "neuronserve_rejected",
            "Requests the front refused itself",
            (*BASE_LABELS, "reason"),
            registry=reg,
        )
        self.stage_bytes = Counter(
            "neuronserve_stage_bytes", "Bytes staged before the engine starts", ("kind",), registry=reg
        )
        self.stage_seconds = Gauge(
            "neuronserve_stage_seconds",
            "Seconds the last staging step took",
            ("kind",),
            registry=reg,
            multiprocess_mode="max",
        )
        self.cache_events = Counter(
            "neuronserve_cache_events", "Compile cache events", ("event",), registry=reg
        )
        self.engine_starts = Counter(
            "neuronserve_engine_starts", "Engine processes started", BASE_LABELS, registry=reg
        )
        self.front_worker_restarts = Counter(
            "neuronserve_front_worker_restarts",
            "Front workers replaced by the supervisor: exited, or stuck (no heartbeat for "
            "NEURONSERVE_FRONT_WORKER_TIMEOUT_S)",
            ("reason",),
            registry=reg,
        )
        info = Gauge(
            "neuronserve_build_info",
            "Versions of neuronserve and its engine stack (value 1)",
            BUILD_LABELS,
            registry=reg,
            multiprocess_mode="max",
        )
        info.labels(**{k: build.get(k) or "none" for k in BUILD_LABELS}).set(1)
        # Zero-valued series exist from the start, so alerts on rate() work before the first event.
        for reason in REJECT_REASONS:
            self.rejected.labels(reason=reason)
        for event in CACHE_EVENTS:
            self.cache_events.labels(event=event)
        for why in WORKER_RESTART_REASONS:
            self.front_worker_restarts.labels(reason=why)
        for kind in STAGE_KINDS:
            self.stage_bytes.labels(kind=kind)
            self.stage_seconds.labels(kind=kind)
        self.registry.register(_LiveState(state, in_flight))
        self._staged: dict[str, tuple[int, float]] = {}  # what -> (bytes counted, first seen)
        # each series' child, looked up once: the labels are bounded (route_label, schemas, statuses)
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self._ttfb: dict[tuple[str, str], Any] = {}

    def observe(self, path: str, schema: str, status: int, ttfb_s: float | None, total_s: float) -> None:
        route = route_label(path)
        key = (route, schema, status)
        children = self._children.get(key)
        if children is None:  # a label lookup costs more than the update: each series' child once
            children = self._children[key] = (
                self.requests.labels(route=route, schema=schema, status=str(status)),
                self.duration.labels(route=route, schema=schema),
            )
        children[0].inc()
        children[1].observe(total_s)
        if ttfb_s is not None:
            ttfb = self._ttfb.get((route, schema))
            if ttfb is None:
                ttfb = self._ttfb[route, schema] = self.ttfb.labels(route=route, schema=schema)
            ttfb.observe(ttfb_s)

    def worker_restarted(self, reason: str) -> None:
        self.front_worker_restarts.labels(reason=reason).inc()

    def reject(self, reason: str) -> None:
        self.rejected.labels(reason=reason).inc()

    def cache_event(self, event: str) -> None:
        if event in CACHE_EVENTS:
            self.cache_events.labels(event=event).inc()

    def stage_progress(self, what: str, done_bytes: int) -> None:
        """Fed by every staging progress report: counts the new bytes and the step's duration so far."""
        kind = "artifacts" if what.startswith("artifacts") else "model"
        now = time.monotonic()
        counted, first = self._staged.get(what, (0, now))
        if done_bytes > counted:
            self.stage_bytes.labels(kind=kind).inc(done_bytes - counted)
            counted = done_bytes
        self._staged[what] = (counted, first)
        self.stage_seconds.labels(kind=kind).set(now - first)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _multiprocess(exposed: CollectorRegistry, path: str) -> CollectorRegistry:
    """Multiprocess mode for this process: its series' values go to files in `path` (the variable
    prometheus_client reads when it makes a value), `exposed` shows every process's, merged; the
    series themselves register in a registry of their own, never exposed (their values are this
    process's alone)."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    if not getattr(values.ValueClass, "_multiprocess", False):
        values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
    MultiProcessCollector(exposed, path)  # type: ignore[no-untyped-call]
    return CollectorRegistry(auto_describe=False)


class Scrapes:
    """/metrics under many scrapers: `at_once` scrapes are answered at a time (the rest wait their
    turn), and the engine's text is fetched at most once per `cache_s`, shared by every scrape that
    asks meanwhile (one fetch in flight, never one per scraper).

    Why: /metrics is outside the gate (it must answer in every phase), and each scrape fetched every
    replica's /metrics through the inference connection pool; 300 concurrent scrapers raised a
    completion's p50 from 31 ms to 1.4 s. Now they cost a handful of engine fetches.
    """

    def __init__(
        self,
        fetch: Callable[[], Awaitable[bytes]],
        cache_s: float,
        at_once: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fetch = fetch
        self.cache_s = cache_s
        self.clock = clock
        self.slots = asyncio.Semaphore(at_once)
        self._text: bytes | None = None
        self._at = 0.0
        self._pending: asyncio.Task[bytes] | None = None

    async def engine(self) -> bytes:
        """The engine's text: cached when fresh, else the one fetch in flight (started if none)."""
        if self._text is not None and self.clock() - self._at < self.cache_s:
            return self._text
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._refresh())
        # shield: a scraper that goes away must not cancel the fetch the others wait for
        return await asyncio.shield(self._pending)

    async def _refresh(self) -> bytes:
        try:
            text = await self.fetch()
            self._text, self._at = text, self.clock()
            return text
        finally:
            self._pending = None

    async def body(self, front: Callable[[], bytes], with_engine: bool) -> bytes:
        """One scrape's answer: the front's series, then the engine's when it runs."""
        async with self.slots:
            text = front()
            if with_engine:
                text += await self.engine()
            return text


async def engine_metrics(session: aiohttp.ClientSession, base_url: str) -> bytes:
    """The engine's own /metrics text, or a comment saying why it is missing (never waits > 1 s)."""
    try:
        async with session.get(
            f"{base_url}/metrics", timeout=aiohttp.ClientTimeout(total=ENGINE_SCRAPE_TIMEOUT_S)
        ) as resp:
            if resp.status != 200:
                return f"# engine metrics unavailable: HTTP {resp.status}\n".encode()
            return await resp.read()
    except TimeoutError:
        return f"# engine metrics unavailable: no answer within {ENGINE_SCRAPE_TIMEOUT_S} s\n".encode()
    except aiohttp.ClientError as err:
        return f"# engine metrics unavailable: {type(err).__name__}\n".encode()


def build_labels(
    versions: Mapping[str, str | None], version: str, sdk: str | None, lane: str | None = None
) -> dict[str, Any]:
    """neuronserve_build_info's labels from the installed versions (host/facts.installed_versions) and
    the plan's stack lane (plan/lanes/registry.py)."""
    cc = versions.get("neuronx-cc")
    return {
        "version": version,
        "vllm": versions.get("vllm") or "none",
        "plugin": versions.get("vllm-neuron") or "none",
        "sdk": sdk or (f"neuronx-cc {cc}" if cc else "none"),
        "lane": lane or "none",
    }
