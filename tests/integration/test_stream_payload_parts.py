"""SageMaker's PayloadPart cutting, reproduced against a real local neuronserve: the raw streamed body of
/invocations is cut into arbitrary byte parts and fed to the deploy tooling's line reassembly."""

from __future__ import annotations

import itertools
import random

import httpx
import pytest
from tests.support.server import Server

from neuronserve.deploy.stream import events, lines_from_parts, payload_parts, text_of

pytestmark = pytest.mark.integration


def _raw_stream(server: Server, body: dict[str, object]) -> bytes:
    with httpx.stream("POST", f"{server.url}/invocations", json=body, timeout=70) as response:
        assert response.status_code == 200
        return b"".join(response.iter_raw())


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": "caf\u00e9 \u2603"}], "max_tokens": 16, "stream": True},
        {"inputs": "the sky is", "parameters": {"max_new_tokens": 16}, "stream": True},
    ],
    ids=["openai-chat", "tgi-generate"],
)
def test_payload_parts_cut_anywhere_reassemble_to_the_same_events(
    server: Server, body: dict[str, object]
) -> None:
    raw = _raw_stream(server, body)
    whole = list(lines_from_parts([raw]))
    assert len(whole) > 2
    rng = random.Random(7)
    for _ in range(100):
        cuts = sorted(rng.sample(range(1, len(raw)), k=min(len(raw) - 1, rng.randint(1, 30))))
        edges = [0, *cuts, len(raw)]
        stream = [{"PayloadPart": {"Bytes": raw[a:b]}} for a, b in itertools.pairwise(edges)]
        assert list(lines_from_parts(payload_parts(stream))) == whole
    text = "".join(text_of(e) for e in events(whole))
    assert text
