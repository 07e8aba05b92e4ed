"""SageMaker's PayloadPart cutting, reproduced against a real local neuronserve: the raw streamed body of
/invocations is cut into arbitrary byte parts and fed to the deploy tooling's line reassembly.

The expected values come from elsewhere: the lines from a plain split of the raw body, the text from
the same request answered without streaming (greedy decoding: the engine's own full text)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import httpx
import pytest
from tests.support.server import Server

from neuronserve.deploy.stream import events, lines_from_parts, payload_parts, text_of

pytestmark = pytest.mark.integration


def _raw_stream(server: Server, body: dict[str, object]) -> bytes:
    with httpx.stream("POST", f"{server.url}/invocations", json=body, timeout=70) as response:
        assert response.status_code == 200
        return b"".join(response.iter_raw())


def _full_text(server: Server, body: dict[str, object]) -> str:
    """The same request without streaming: what the streamed pieces must add up to."""
    r = httpx.post(f"{server.url}/invocations", json={**body, "stream": False}, timeout=70)
    assert r.status_code == 200, r.text
    answer: Any = r.json()
    if "choices" in answer:
        return str(answer["choices"][0]["message"]["content"])
    return str((answer[0] if isinstance(answer, list) else answer)["generated_text"])


@pytest.mark.parametrize(
    "body",
    [
        {
            "messages": [{"role": "user", "content": "caf\u00e9 \u2603"}],
            "max_tokens": 16,
            "temperature": 0,
            "stream": True,
        },
        {"inputs": "the sky is", "parameters": {"max_new_tokens": 16, "do_sample": False}, "stream": True},
    ],
    ids=["openai-chat", "tgi-generate"],
)
def test_payload_parts_cut_anywhere_reassemble_to_the_same_events(
    server: Server, body: dict[str, object]
) -> None:
    raw = _raw_stream(server, body)
    whole = [line.removesuffix("\r") for line in raw.decode().split("\n")]
    if raw.endswith(b"\n"):
        whole.pop()
    assert len(whole) > 2
    rng = random.Random(7)
    for _ in range(100):
        cuts = sorted(rng.sample(range(1, len(raw)), k=min(len(raw) - 1, rng.randint(1, 30))))
        edges = [0, *cuts, len(raw)]
        stream = [{"PayloadPart": {"Bytes": raw[a:b]}} for a, b in itertools.pairwise(edges)]
        assert list(lines_from_parts(payload_parts(stream))) == whole
    text = "".join(text_of(e) for e in events(whole))
    assert text == _full_text(server, body)
    assert len(text) > 1
