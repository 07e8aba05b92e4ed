"""The front's own /metrics on the shared server (real vLLM CPU engine): every series, after real traffic,
and while the engine was still loading.

Counters are cumulative over the session's shared server, so traffic checks compare a scrape before
with a scrape after (deltas), never absolute values.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.support.server import Server, engine_core_pid, frozen

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def series(samples: Samples, name: str) -> list[dict[str, str]]:
    return [dict(labels) for (n, labels) in samples if n == name]


def scrape(server: Server) -> Samples:
    r = httpx.get(f"{server.url}/metrics", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return parse(r.text)


def test_metrics_answer_while_loading_with_front_series_only(server: Server) -> None:
    assert {"STAGING", "LOADING"} <= set(server.phase_metrics), sorted(server.phase_metrics)
    staging = parse(server.phase_metrics["STAGING"])
    assert value(staging, "neuronserve_phase", phase="STAGING") == 1.0
    assert value(staging, "neuronserve_engine_starts_total") == 0.0
    loading_text = server.phase_metrics["LOADING"]
    assert "vllm:" not in loading_text  # the engine is not asked while it loads
    loading = parse(loading_text)
    assert value(loading, "neuronserve_phase", phase="LOADING") == 1.0
    assert value(loading, "neuronserve_phase", phase="READY") == 0.0
    assert value(loading, "neuronserve_engine_starts_total") == 1.0
    # the weights were staged from S3 (one GET held ~6 s) before the engine started
    assert value(loading, "neuronserve_stage_bytes_total", kind="model") > 100_000
    assert value(loading, "neuronserve_stage_seconds", kind="model") >= 3.0
    assert value(loading, "neuronserve_in_flight") == 0.0
    info = series(loading, "neuronserve_build_info")
    assert len(info) == 1 and info[0]["vllm"] not in ("", "none") and info[0]["version"]
    assert {"plugin", "sdk"} <= set(info[0])
    assert info[0]["lane"] == "none"  # no Neuron lane runs on the CPU (front/version.py running_stack)
    for event in ("hit", "miss", "publish_ok", "publish_failed", "corrupt"):
        assert ("neuronserve_cache_events_total", (("event", event),)) in loading
    for reason in ("limit", "payload", "draining", "not_ready", "bad_request"):
        assert ("neuronserve_rejected_total", (("reason", reason),)) in loading
    # the invocation wait_ready sent before READY was refused as not ready
    assert value(loading, "neuronserve_rejected_total", reason="not_ready") >= 1.0


def _traffic(server: Server) -> None:
    url = server.url
    with httpx.Client(timeout=60) as c:
        assert (
            c.post(
                f"{url}/invocations", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
            ).status_code
            == 200
        )
        with c.stream(
            "POST", f"{url}/invocations", json={"prompt": "hi", "max_tokens": 5, "stream": True}
        ) as r:
            assert r.status_code == 200
            r.read()
        assert (
            c.post(
                f"{url}/invocations", json={"inputs": "hi", "parameters": {"max_new_tokens": 3}}
            ).status_code
            == 200
        )
        assert c.post(f"{url}/invocations", content=b"x" * (1024 * 1024 + 10)).status_code == 413
        assert c.post(f"{url}/invocations", content=b"{not json").status_code == 400
        assert (
            c.post(f"{url}/invocations", content=b"{}", headers={"content-type": "text/plain"}).status_code
            == 415
        )
        assert c.post(f"{url}/scale_elastic_ep", json={"new_data_parallel_size": 2}).status_code == 404


def test_every_series_moves_with_real_traffic(server: Server) -> None:
    before = scrape(server)
    assert value(before, "neuronserve_phase", phase="READY") == 1.0
    _traffic(server)
    after = scrape(server)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    req = "neuronserve_requests_total"
    assert delta(req, route="/invocations", schema="chat", status="200") == 1
    assert delta(req, route="/invocations", schema="completion", status="200") == 1
    assert delta(req, route="/invocations", schema="tgi", status="200") == 1
    assert delta(req, route="/invocations", schema="none", status="413") == 1
    assert delta(req, route="other", schema="none", status="404") == 1
    assert delta("neuronserve_rejected_total", reason="payload") == 1
    assert delta("neuronserve_rejected_total", reason="bad_request") == 2  # 400 and 415
    assert delta("neuronserve_rejected_total", reason="not_found") == 1
    dur = "neuronserve_request_duration_seconds_count"
    assert delta(dur, route="/invocations", schema="completion") == 1
    ttfb = "neuronserve_time_to_first_byte_seconds"
    assert delta(ttfb + "_count", route="/invocations", schema="completion") == 1
    # a stream's first byte comes before its last one
    assert delta(ttfb + "_sum", route="/invocations", schema="completion") < delta(
        "neuronserve_request_duration_seconds_sum", route="/invocations", schema="completion"
    )
    assert value(after, "neuronserve_in_flight") == 0.0
    # the engine's own series follow the front's in the same text
    assert any(name.startswith("vllm:") for (name, _) in after)


@pytest.fixture
def held_requests(server: Server) -> Iterator[list[int]]:
    """6 requests in flight (the shared server's limit) held by a frozen EngineCore."""
    statuses: list[int] = []
    limits = httpx.Limits(max_connections=10, max_keepalive_connections=10)
    with httpx.Client(timeout=120, limits=limits) as client:

        def one() -> None:
            r = client.post(f"{server.url}/invocations", json={"prompt": "hi", "max_tokens": 5})
            statuses.append(r.status_code)

        threads = [threading.Thread(target=one) for _ in range(6)]
        with frozen(engine_core_pid(server)):
            for t in threads:
                t.start()
            deadline = time.monotonic() + 6
            while value(scrape(server), "neuronserve_in_flight") < 6 and time.monotonic() < deadline:
                time.sleep(0.05)
            yield statuses
        for t in threads:  # inside the client's block: it must outlive its requests
            t.join(timeout=120)


def test_in_flight_and_limit_rejections_while_the_engine_is_saturated(
    server: Server, held_requests: list[int]
) -> None:
    before = scrape(server)
    assert value(before, "neuronserve_in_flight") == 6.0
    r = httpx.post(f"{server.url}/invocations", json={"prompt": "hi", "max_tokens": 2}, timeout=10)
    assert r.status_code == 429
    t0 = time.monotonic()
    after = scrape(server)
    assert time.monotonic() - t0 < 3.0  # the engine's API answers; its core is frozen
    assert (
        value(after, "neuronserve_rejected_total", reason="limit")
        - value(before, "neuronserve_rejected_total", reason="limit")
        == 1
    )
    assert value(after, "neuronserve_requests_total", route="/invocations", schema="none", status="429") >= 1
