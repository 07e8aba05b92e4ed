"""A streamed response cut at arbitrary byte boundaries (as SageMaker's PayloadParts are) reassembles
into the same events."""

from __future__ import annotations

import random

import httpx
import pytest
from tests.support.server import Server

from neuronserve.front.sse import SSEParser

pytestmark = pytest.mark.integration


def _reference_events(raw: bytes) -> list[str]:
    """Independent whole-body parse: events are separated by blank lines."""
    out = []
    for block in raw.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        data = [ln.partition(":")[2].removeprefix(" ") for ln in block.split("\n") if ln.startswith("data:")]
        if data:
            out.append("\n".join(data))
    return out


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": "héllo ✓"}], "max_tokens": 12, "stream": True},
        {"inputs": "héllo", "parameters": {"max_new_tokens": 12, "details": True}, "stream": True},
    ],
    ids=["openai", "tgi"],
)
def test_arbitrary_byte_chunks_reassemble(server: Server, body: dict[str, object]) -> None:
    with httpx.stream("POST", f"{server.url}/invocations", json=body, timeout=60) as r:
        assert r.status_code == 200
        raw = b"".join(r.iter_raw())
    expected = _reference_events(raw)
    assert len(expected) >= 3
    rng = random.Random(1234)
    for trial in range(50):
        parser = SSEParser()
        events: list[str] = []
        i = 0
        while i < len(raw):
            n = 1 if trial == 0 else rng.randint(1, 40)
            events += parser.feed(raw[i : i + n])
            i += n
        events += parser.close()
        assert events == expected, f"trial {trial}"
