"""front/requestrecord.py: the access line and the request metrics of a request the gate answered,
refused or lost."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.requestid import REQUEST_ID_KEY
from neuronserve.front.requestrecord import REJECTED_KEY, SCHEMA_KEY, TOKENS_KEY, RequestRecord
from neuronserve.front.state import ServerState


def _scope(path: str, raw: bytes | None = None, **extra: Any) -> dict[str, Any]:
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": [],
        REQUEST_ID_KEY: "r-1",
    }
    if raw is not None:
        scope["raw_path"] = raw
    return scope | extra


def _value(text: str, name: str, **labels: str) -> float:
    """The sample `name` whose labels include `labels`, from the exposition text (0 if absent)."""
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _metrics() -> FrontMetrics:
    return FrontMetrics(ServerState(), lambda: 0, {})


def test_the_access_line_has_each_field_once_whatever_the_client_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="neuronserve.access")
    scope = _scope("/x status=200", b"/x%20status=200%20request_id=FORGED", **{TOKENS_KEY: (5, 7)})
    RequestRecord(None).log(scope, 404, time.perf_counter() - 0.25)
    (record,) = [r for r in caplog.records if r.name == "neuronserve.access"]
    line = record.getMessage()
    assert line.startswith("POST /x%20status%3D200%20request_id%3DFORGED status=404 latency_ms=")
    assert line.endswith(" tokens_in=5 tokens_out=7 request_id=r-1")
    assert line.count("status=") == 1 and line.count("request_id=") == 1
    assert 250.0 <= float(line.split("latency_ms=")[1].split()[0]) < 5000.0
    assert record.__dict__["status"] == 404 and record.__dict__["request_id"] == "r-1"
    assert record.__dict__["route"] == "other"  # a path outside the allowlist is not a label value
    assert record.__dict__["tokens"] == {"prompt": 5, "completion": 7}


def test_unknown_or_odd_token_counts_cannot_forge_a_field(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="neuronserve.access")
    RequestRecord(None).log(_scope("/invocations"), 200, time.perf_counter())
    RequestRecord(None).log(
        _scope("/invocations", **{TOKENS_KEY: ("1 status=500", None)}), 200, time.perf_counter()
    )
    first, second = (r.getMessage() for r in caplog.records if r.name == "neuronserve.access")
    assert " tokens_in=- tokens_out=- " in first
    assert " tokens_in=1%20status%3D500 tokens_out=- " in second and second.count("status=") == 1


def test_an_answer_is_measured_under_its_schema_and_a_handlers_refusal_under_its_reason() -> None:
    metrics = _metrics()
    record = RequestRecord(metrics)
    start = time.perf_counter()
    record.measure(_scope("/v1/completions"), "/v1/completions", 200, start, start + 0.01)
    record.measure(_scope("/invocations", **{SCHEMA_KEY: "tgi"}), "/invocations", 200, start, None)
    record.measure(_scope("/invocations", **{REJECTED_KEY: 413}), "/invocations", 413, start, None)
    text = metrics.render().decode()
    requests = "neuronserve_requests_total"
    assert _value(text, requests, route="/v1/completions", schema="openai", status="200") == 1
    assert _value(text, requests, route="/invocations", schema="tgi", status="200") == 1
    assert _value(text, requests, route="/invocations", schema="none", status="413") == 1
    assert _value(text, "neuronserve_rejected_total", reason="payload") == 1
    ttfb = "neuronserve_time_to_first_byte_seconds_count"
    assert _value(text, ttfb, route="/v1/completions") == 1 and _value(text, ttfb, route="/invocations") == 0


def test_a_gate_refusal_is_counted_under_the_reason_given() -> None:
    metrics = _metrics()
    RequestRecord(metrics).refused(_scope("/generate"), 408, time.perf_counter(), "bad_request")
    text = metrics.render().decode()
    assert _value(text, "neuronserve_rejected_total", reason="bad_request") == 1
    assert _value(text, "neuronserve_requests_total", route="/generate", schema="tgi", status="408") == 1


def test_without_metrics_nothing_is_kept_and_nothing_fails() -> None:
    record = RequestRecord(None)
    record.measure(_scope("/invocations"), "/invocations", 200, time.perf_counter(), None)
    record.refused(_scope("/invocations"), 503, time.perf_counter(), "not_ready")
