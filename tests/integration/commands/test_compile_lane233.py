"""Lane 2.33's compile cache shared across pods (aws-neuron-sdk#1368): `neuronserve compile` as a Job runs
it (a subprocess, the real plan for NEURONSERVE_STACK=2.33 on trn2, the real stager and publisher) with
the stand-in engine in its rewritten-plugin form (tests/support/standin_engine: it compiles into
`$VLLM_CACHE_ROOT/neuron/compile_cache/<hash>/` and, on the native route, saves its trace under
`$VLLM_CACHE_ROOT`) and the session's moto S3 server.

The first pod compiles and pushes the whole VLLM_CACHE_ROOT: the compile cache AND the precompile cache.
A second pod on another work dir, with NEURONSERVE_REQUIRE_CACHE_HIT=true, stages both before its engine
starts: the engine finds its graph and a warm trace, loads instead of compiling, and runs with the
plugin's own no-compile switch set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import neuronserve
from tests.support.standin_server import standin_events, standin_server

from neuronserve.stage.paths import MANIFEST_NAME

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

LANE_233 = {"NEURONSERVE_STACK": "2.33", "NEURONSERVE_INSTANCE_TYPE": "trn2.3xlarge"}


def test_the_first_pod_s_compile_and_trace_start_the_second_pod(
    tmp_path: Path, s3: Any, bucket: str, compile_env: dict[str, str]
) -> None:
    env = {**compile_env, **LANE_233}
    plan = neuronserve(["plan", "--json", "--device", "neuron"], env)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    key, engine_env = doc["cache_key"], doc["env"]
    assert doc["stack"] == {"lane": "2.33", "sdk": "2.33.0", "vllm_neuron": "0.29.0.1.2.0", "vllm": "0.29.0"}
    assert engine_env["VLLM_CACHE_ROOT"] == f"{env['NEURONSERVE_WORK_DIR']}/artifacts/{key}"
    assert engine_env["VLLM_NEURON_BACKEND"] == "neuron_native"
    assert engine_env["TORCH_CACHING_PRECOMPILE"] == "1"
    # The same settings on lane 2.32 are another entry: lanes never share compiled artifacts.
    other = neuronserve(["plan", "--json", "--device", "neuron"], {**env, "NEURONSERVE_STACK": "2.32"})
    assert other.returncode == 0, other.stderr
    assert json.loads(other.stdout)["cache_key"] != key

    first = neuronserve(["compile", "--device", "neuron"], env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    assert f"compile cache miss for key {key}" in first.stdout
    events = standin_events(env["STANDIN_EVENTS"])
    assert [(e["event"], e.get("precompile")) for e in events] == [("start", "cold"), ("compiled", None)]
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=f"cache/{key}/{MANIFEST_NAME}")["Body"].read())
    pushed = {f["path"] for f in manifest["files"]}
    assert "neuron/compile_cache/standin-graph-hash/model.neff" in pushed  # the plugin's compile cache
    assert "precompile/trace.bin" in pushed  # and the native route's saved trace, both under the root

    # The second pod: another work dir, a required hit; staged before the engine starts.
    settings = {k: v for k, v in env.items() if k.startswith(("NEURONSERVE_CACHE_URI", "AWS_"))}
    (tmp_path / "pod2").mkdir()
    with standin_server(
        tmp_path / "pod2", NEURONSERVE_REQUIRE_CACHE_HIT="true", **settings, **LANE_233
    ) as server:
        assert "compile cache hit" in server.log()
    served = standin_events(tmp_path / "pod2" / "standin-events.jsonl")
    assert [(e["event"], e.get("precompile")) for e in served] == [("start", "warm"), ("loaded", None)]
    assert served[0]["marker"] is True  # the stage's completion manifest was there before the engine
    assert "model.neff" in served[0]["files"]


def test_a_required_hit_on_an_empty_cache_starts_no_engine(compile_env: dict[str, str]) -> None:
    env = {**compile_env, "NEURONSERVE_REQUIRE_CACHE_HIT": "true", **LANE_233}
    plan = neuronserve(["plan", "--json", "--device", "neuron"], env)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["env"]["VLLM_NEURON_DISABLE_WARMUP_COMPILE"] == "1"
    staged = neuronserve(["stage", "--json"], env)
    assert staged.returncode != 0
    assert "NEURONSERVE_REQUIRE_CACHE_HIT" in staged.stdout + staged.stderr
    assert standin_events(env["STANDIN_EVENTS"]) == []
