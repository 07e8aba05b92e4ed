"""The keyed compile cache of lanes 2.32 and 2.33 through the real CLI and a real (moto) S3.

Lane 2.32's entry is `$VLLM_CACHE_ROOT/neuron/compile_cache`, the directory vllm-neuron 0.24 compiles
into: it is pushed from there and staged into there; pushing the root is refused naming that directory.
Lane 2.33's entry is the whole VLLM_CACHE_ROOT (vllm-neuron 0.29's compile cache and the native route's
precompile cache): pushing its neuron/compile_cache alone is refused naming the root.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.s3.commands.test_cli import cli, neuron_env
from tests.s3.stage.test_cache import tree

pytestmark = pytest.mark.s3
COMPILE_CACHE = "neuron/compile_cache"
GRAPH = {"a1b2c3/model.neff": b"n" * 40_000, "a1b2c3/.compilation_complete": b""}


@dataclass(frozen=True)
class Lane:
    stack: str
    entry: str  # the keyed entry's directory under VLLM_CACHE_ROOT ("" for the root itself)
    wrong: str  # the directory a push from is refused, naming `entry`
    files: dict[str, bytes]  # the entry's content


# What the engine left under a build machine's own VLLM_CACHE_ROOT (compilation_cache.md: a <hash>/
# directory per graph; lane 2.33 also saves a trace).
LANES = [
    Lane("2.32", COMPILE_CACHE, "", GRAPH),
    Lane(
        "2.33",
        "",
        COMPILE_CACHE,
        {**{f"{COMPILE_CACHE}/{k}": v for k, v in GRAPH.items()}, "precompile/trace.bin": b"t" * 5_000},
    ),
]


@pytest.mark.parametrize("lane", LANES, ids=[lane.stack for lane in LANES])
def test_miss_push_of_the_lane_s_entry_then_hit_where_the_plugin_reads(
    lane: Lane, s3: Any, bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    env = neuron_env(
        s3,
        bucket,
        s3_env,
        tmp_path / "work",
        NEURONSERVE_STACK=lane.stack,
        NEURONSERVE_INSTANCE_TYPE="trn2.3xlarge",
    )
    plan = cli(["plan", "--json"], env)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    root = doc["env"]["VLLM_CACHE_ROOT"]
    assert doc["stack"]["lane"] == lane.stack and root.endswith(doc["cache_key"])
    first = cli(["stage", "--json"], env)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["cache"] == "miss"

    built = tmp_path / "vllm-cache"  # a build machine's own VLLM_CACHE_ROOT
    entry = built / lane.entry
    for rel, data in lane.files.items():
        (entry / rel).parent.mkdir(parents=True, exist_ok=True)
        (entry / rel).write_bytes(data)
    wrong = built / lane.wrong
    refused = cli(["cache", "push", str(wrong)], env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"push {entry} instead" in refused.stderr
    # The same refusal with an explicit --key (no plan made): the lane comes from NEURONSERVE_STACK.
    keyed = cli(["cache", "push", str(wrong), "--key", doc["cache_key"]], env)
    assert keyed.returncode == 2 and f"push {entry} instead" in keyed.stderr
    push = cli(["cache", "push", str(entry)], env)
    assert push.returncode == 0, push.stderr

    second = cli(["stage", "--json"], {**env, "NEURONSERVE_WORK_DIR": str(tmp_path / "work2")})
    assert second.returncode == 0, second.stderr
    staged = json.loads(second.stdout)
    assert staged["cache"] == "hit"
    work2_root = root.replace(str(tmp_path / "work"), str(tmp_path / "work2"))
    assert staged["artifacts_dir"] == str(Path(work2_root) / lane.entry)
    assert tree(staged["artifacts_dir"]) == lane.files
