"""Compile-cache events reach the front's metrics: corrupt, publish_ok, publish_failed (hit and miss are
counted by the serve lifecycle from the stage result). Real moto S3, real FrontMetrics counters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.s3.conftest import ServerControl
from tests.s3.stage.test_cache import compile_into, keyed_plan

from neuronserve.front.metrics import FrontMetrics
from neuronserve.front.state import ServerState
from neuronserve.stage import events, publish_artifacts, stage_all
from neuronserve.stage.paths import MANIFEST_NAME

pytestmark = pytest.mark.s3


def _counts(metrics: FrontMetrics) -> dict[str, float]:
    out = {}
    for family in metrics.registry.collect():
        if family.name == "neuronserve_cache_events":
            for s in family.samples:
                if s.name.endswith("_total"):
                    out[s.labels["event"]] = s.value
    return out


def test_cache_events_are_counted(
    s3: Any, bucket: str, s3_env: dict[str, str], s3_server: ServerControl, tmp_path: Path
) -> None:
    metrics = FrontMetrics(ServerState(), lambda: 0, {})
    unsubscribe = events.subscribe(metrics.cache_event)
    try:
        remote = f"s3://{bucket}/cache/k1/"
        plan = keyed_plan(tmp_path, remote, "w1")
        result = stage_all(plan, s3_env)
        assert result.cache == "miss"
        compile_into(result.artifacts_dir or "", "A")
        publish_artifacts(plan, result, s3_env)
        assert _counts(metrics)["publish_ok"] == 1
        # a damaged manifest: the next reader treats it as a miss and says so
        s3.put_object(Bucket=bucket, Key=f"cache/k1/{MANIFEST_NAME}", Body=b"{not json")
        assert stage_all(keyed_plan(tmp_path, remote, "r1"), s3_env).cache == "miss"
        assert _counts(metrics)["corrupt"] == 1
        # a writer without permission: publishing fails, serving would go on
        plan2 = keyed_plan(tmp_path, f"s3://{bucket}/cache/k2/", "w2")
        result2 = stage_all(plan2, s3_env)
        compile_into(result2.artifacts_dir or "", "B")
        s3_server.deny.add(bucket)
        try:
            publish_artifacts(plan2, result2, s3_env)
        finally:
            s3_server.deny.discard(bucket)
        counts = _counts(metrics)
        assert counts["publish_failed"] == 1 and counts["publish_ok"] == 1
        assert b'neuronserve_cache_events_total{event="publish_failed"} 1.0' in metrics.render()
    finally:
        unsubscribe()
