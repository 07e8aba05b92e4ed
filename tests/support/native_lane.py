"""Plans of lane 2.32 (plan/lanes/native/) on a laptop: no plugin installed, NEURONSERVE_STACK=2.32, two
visible NeuronCores; shared by tests/unit/plan/lanes/native/."""

from __future__ import annotations

import json
from typing import Any

from tests.support.builders import facts, plan, refusal

from neuronserve.plan.facts import HostFacts
from neuronserve.plan.lanes.native import translate

LAPTOP = {"vllm": None, "vllm-neuron": None}
BASE = {
    "SM_VLLM_MODEL": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "NEURONSERVE_STACK": "2.32",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    "SM_VLLM_MAX_MODEL_LEN": "1024",
    "SM_VLLM_MAX_NUM_SEQS": "4",
}


def laptop(**kw: Any) -> HostFacts:
    return facts(versions=dict(LAPTOP), visible_cores=2, **kw)


def build(env: dict[str, str], **kw: Any) -> Any:
    return plan({**BASE, **env}, laptop(**kw))


def refused(env: dict[str, str]) -> Any:
    return refusal({**BASE, **env}, laptop())


def neuron_config(p: Any) -> dict[str, Any]:
    argv = list(p.argv)
    doc = json.loads(argv[argv.index("--additional-config") + 1])
    assert set(doc) <= translate.TOP_LEVEL
    return doc["neuron_config"]
