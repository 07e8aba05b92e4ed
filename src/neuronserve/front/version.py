"""GET /version: the engine's answer, extended with neuronserve's own version and stack lane.

/version stays an engine route (forwarded, routes.TABLE): vLLM answers `{"version": "<vllm>"}` and
clients read that key, so it is kept as the engine sent it. The front adds one object,
`"neuronserve": {"version", "stack": {"lane", "sdk", "vllm_neuron", "vllm"}}`, so a client can tell
which lane's image answers (docs/LANES.md) without a second route. Anything else the engine answers
(an error, a body that is not a JSON object) is relayed unchanged. Pure: bytes in, bytes out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

PATH = "/version"


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
