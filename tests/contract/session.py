"""The contract tier's one run: plan every case here, then run each lane's stack on its plans in a child
process of its own (two vLLM versions cannot share an interpreter), both lanes at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.contract import sources
from tests.contract.cases import all_cases
from tests.contract.planning import Planned, model_dirs, plan_case


class ChildFailed(RuntimeError):
    """A lane's child process did not finish (its log's tail is the message)."""


CHILD_TIMEOUT_S = 300
# The children's own environment: the lane's libraries first, vLLM quiet, offline, and a model-info cache
# of each vLLM version's own (vLLM keys it by path: a newer vLLM's entries do not load in an older one).
CHILD_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_LOGGING_LEVEL": "ERROR",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


@dataclass
class Outcome:
    """One case: its plan side and what its lane's stack did with it (None: not run in the stack)."""

    planned: Planned
    stack: dict[str, Any] | None


@dataclass
class Run:
    outcomes: dict[str, Outcome]
    seconds: dict[str, float]


def run_lanes(root: Path) -> Run:
    models = model_dirs(root)
    planned = {case.id: plan_case(case, root, models) for case in all_cases()}
    reference = sources.reference_dir()
    unpacked = sources.manifest()
    assert reference is not None
    procs = {}
    for lane in sources.LANES:
        requests = [p.request for p in planned.values() if p.case.lane == lane.lane and p.request]
        request = root / f"request-{lane.lane}.json"
        request.write_text(json.dumps({"cases": requests}))
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("NEURON", "SM_", "VLLM_"))},
            **CHILD_ENV,
            "PYTHONPATH": os.pathsep.join(sources.python_path(lane, reference, unpacked)),
            "VLLM_CACHE_ROOT": str(sources.cache_home() / "contract" / f"vllm-cache-{lane.vllm}"),
        }
        result = root / f"result-{lane.lane}.json"
        cmd = [sys.executable, "-m", "tests.contract.child", str(request), str(result)]
        log = (root / f"child-{lane.lane}.log").open("w")
        procs[lane.lane] = (subprocess.Popen(cmd, env=env, cwd=root, stdout=log, stderr=log), result, log)
    outcomes: dict[str, Outcome] = {}
    seconds: dict[str, float] = {}
    started = time.monotonic()
    for lane_id, (proc, result, log) in procs.items():
        code = proc.wait(timeout=max(1, CHILD_TIMEOUT_S - (time.monotonic() - started)))
        log.close()
        if code != 0 or not result.exists():
            tail = Path(log.name).read_text()[-4000:]
            raise ChildFailed(f"lane {lane_id}: the stack's child exited {code}:\n{tail}")
        doc = json.loads(result.read_text())
        seconds[lane_id] = doc["seconds"]
        for case_id, stack in doc["cases"].items():
            outcomes[case_id] = Outcome(planned[case_id], stack)
    for case_id, p in planned.items():
        outcomes.setdefault(case_id, Outcome(p, None))
    return Run(outcomes, seconds)
