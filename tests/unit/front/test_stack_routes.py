"""The stack lane in the front's answers: /info, /version (the engine's JSON, extended) and
neuronserve_build_info, through the real app in front of a stand-in engine."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import generate_latest
from tests.support.front_app import running_front

import neuronserve
import neuronserve.plan.lanes.registry as lanes
from neuronserve.front.metrics import FrontMetrics, build_labels
from neuronserve.front.state import ServerState

STACK = lanes.LANE_2_28.stack_json()


def test_version_keeps_the_engine_answer_and_adds_the_lane() -> None:
    async def go() -> dict[str, Any]:
        answers = {"/version": lambda _: {"version": "0.13.0"}}
        async with running_front(answers=answers) as front:
            front.state.stack = dict(STACK)
            r = await front.client.get("/version")
            assert r.status_code == 200 and int(r.headers["content-length"]) == len(r.content)
            assert front.seen == [("GET", "/version")]  # still the engine's route
            return dict(r.json())

    doc = asyncio.run(go())
    assert doc == {"version": "0.13.0", "neuronserve": {"version": neuronserve.__version__, "stack": STACK}}


def test_version_relays_what_is_not_a_json_object_unchanged() -> None:
    async def go() -> Any:
        async with running_front(answers={"/version": lambda _: ["0.13.0"]}) as front:
            front.state.stack = dict(STACK)
            return (await front.client.get("/version")).json()

    assert asyncio.run(go()) == ["0.13.0"]


def test_info_names_the_lane_and_keeps_tgi_fields() -> None:
    async def go() -> dict[str, Any]:
        async with running_front() as front:
            front.state.stack = dict(STACK)
            r = await front.client.get("/info")
            assert r.status_code == 200
            return dict(r.json())

    info = asyncio.run(go())
    assert info["stack"] == STACK
    assert info["router"] == "neuronserve" and info["version"] == neuronserve.__version__


def test_build_info_carries_the_lane_label() -> None:
    labels = build_labels({"vllm": "0.13.0", "vllm-neuron": "0.4.1"}, "9.9", "2.28", "2.28")
    metrics = FrontMetrics(ServerState(), lambda: 0, labels)
    text = generate_latest(metrics.registry).decode()
    line = next(x for x in text.splitlines() if x.startswith("neuronserve_build_info{"))
    assert 'lane="2.28"' in line and 'plugin="0.4.1"' in line
    unset = build_labels({}, "9.9", None)
    assert unset["lane"] == "none"
