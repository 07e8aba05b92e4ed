"""The front's own series (front/metrics.py), read back with prometheus_client's own text parser; the
scrape sharing (`Scrapes`) with a counting fetch; the engine text fetched from a real stand-in on
127.0.0.1. The whole-server version, after real traffic, is tests/integration/test_metrics.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from tests.support.aiohttp_engine import engine

from neuronserve.front.metrics import (
    CACHE_EVENTS,
    REJECT_REASONS,
    FrontMetrics,
    Scrapes,
    build_labels,
    engine_metrics,
    reason_for,
    route_label,
)
from neuronserve.front.state import Phase, ServerState

BUILD = {"version": "1.0", "vllm": "0.11.0", "plugin": "0.2.2+lts", "sdk": "2.27", "lane": "2.27"}


def samples(metrics: FrontMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_series_exist_at_zero_before_any_event() -> None:
    got = samples(FrontMetrics(ServerState(), lambda: 0, BUILD))
    for reason in REJECT_REASONS:
        assert got[("neuronserve_rejected_total", (("reason", reason),))] == 0
    for event in CACHE_EVENTS:
        assert got[("neuronserve_cache_events_total", (("event", event),))] == 0
    assert got[("neuronserve_build_info", tuple(sorted(BUILD.items())))] == 1
    assert got[("neuronserve_phase", (("phase", "STAGING"),))] == 1
    assert got[("neuronserve_phase", (("phase", "READY"),))] == 0


def test_phase_and_in_flight_are_read_at_scrape_time() -> None:
    state, flight = ServerState(), [0]
    metrics = FrontMetrics(state, lambda: flight[0], BUILD)
    state.move(Phase.LOADING)
    flight[0] = 7
    got = samples(metrics)
    assert got[("neuronserve_phase", (("phase", "LOADING"),))] == 1
    assert got[("neuronserve_phase", (("phase", "STAGING"),))] == 0
    assert got[("neuronserve_in_flight", ())] == 7


def test_observations_are_labelled_by_a_bounded_route() -> None:
    metrics = FrontMetrics(ServerState(), lambda: 0, BUILD)
    metrics.observe("/invocations", "tgi", 200, 0.01, 0.2)
    metrics.observe("/etc/passwd", "openai", 404, None, 0.001)
    metrics.reject("limit")
    metrics.cache_event("hit")
    metrics.cache_event("not-an-event")  # ignored: label values stay the fixed set
    got = samples(metrics)
    key = (("route", "/invocations"), ("schema", "tgi"), ("status", "200"))
    assert got[("neuronserve_requests_total", key)] == 1
    assert (
        got[("neuronserve_requests_total", (("route", "other"), ("schema", "openai"), ("status", "404")))]
        == 1
    )
    assert (
        got[("neuronserve_request_duration_seconds_count", (("route", "/invocations"), ("schema", "tgi")))]
        == 1
    )
    assert (
        "neuronserve_time_to_first_byte_seconds_count",
        (("route", "other"), ("schema", "openai")),
    ) not in got
    assert got[("neuronserve_rejected_total", (("reason", "limit"),))] == 1
    assert got[("neuronserve_cache_events_total", (("event", "hit"),))] == 1
    assert not [k for k in got if ("event", "not-an-event") in k[1]]


def test_stage_progress_counts_only_new_bytes_per_step() -> None:
    metrics = FrontMetrics(ServerState(), lambda: 0, BUILD)
    for what, done in (("model", 100), ("model", 250), ("model", 250), ("artifacts/abc", 40), ("model", 200)):
        metrics.stage_progress(what, done)
    got = samples(metrics)
    assert got[("neuronserve_stage_bytes_total", (("kind", "model"),))] == 250
    assert got[("neuronserve_stage_bytes_total", (("kind", "artifacts"),))] == 40


def test_labels_and_reasons() -> None:
    assert route_label("/ping") == "/ping" and route_label("/admin") == "other"
    assert reason_for(413) == "payload" and reason_for(404) == "not_found"
    assert reason_for(429) is None and reason_for(200) is None  # the gate counts its own 429s as "limit"
    assert build_labels({"neuronx-cc": "2.21"}, "1.0", None) == {
        "version": "1.0",
        "vllm": "none",
        "plugin": "none",
        "sdk": "neuronx-cc 2.21",
        "lane": "none",
    }
    assert build_labels({"vllm": "0.11.0"}, "1.0", "2.27.1", "2.27")["sdk"] == "2.27.1"
    assert build_labels({}, "1.0", None)["sdk"] == "none"


def test_scrapes_share_one_engine_fetch_while_it_is_fresh() -> None:
    fetches, now = [0], [0.0]

    async def fetch() -> bytes:
        fetches[0] += 1
        await asyncio.sleep(0.01)
        return f"engine {fetches[0]}\n".encode()

    async def run() -> list[bytes]:
        scrapes = Scrapes(fetch, cache_s=1.0, at_once=2, clock=lambda: now[0])
        front: Callable[[], bytes] = lambda: b"front\n"  # noqa: E731
        first = await asyncio.gather(*(scrapes.body(front, True) for _ in range(20)))
        now[0] = 0.5
        fresh = await scrapes.body(front, True)
        now[0] = 1.5
        stale = await scrapes.body(front, True)
        alone = await scrapes.body(front, False)
        return [*set(first), fresh, stale, alone]

    first, fresh, stale, alone = asyncio.run(run())
    assert first == b"front\nengine 1\n" and fresh == first
    assert stale == b"front\nengine 2\n"
    assert alone == b"front\n"
    assert fetches[0] == 2


def test_engine_metrics_says_why_they_are_missing() -> None:
    async def run(status: int) -> bytes:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(text="vllm:x 1\n", status=status)

        async with engine(handler) as url, aiohttp.ClientSession() as session:
            return await engine_metrics(session, url)

    async def unreachable() -> bytes:
        async with aiohttp.ClientSession() as session:
            return await engine_metrics(session, "http://127.0.0.1:1")

    assert asyncio.run(run(200)) == b"vllm:x 1\n"
    assert asyncio.run(run(500)) == b"# engine metrics unavailable: HTTP 500\n"
    assert asyncio.run(unreachable()) == b"# engine metrics unavailable: ClientConnectorError\n"
