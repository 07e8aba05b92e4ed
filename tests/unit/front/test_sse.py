"""SSE and JSON-lines re-chunking: any cut of the bytes gives the same events."""

from __future__ import annotations

import random

import pytest

from neuronserve.front.sse import LineParser, SSEParser

STREAM = (
    'data: {"text": "h\u00e9llo \u2713"}\n\n'
    ": keep-alive comment\n\n"
    'data:{"text": "two"}\r\n\r\n'
    "event: message\ndata: line one\ndata: line two\n\n"
    "data: [DONE]\n\n"
).encode()
EXPECTED = ['{"text": "h\u00e9llo \u2713"}', '{"text": "two"}', "line one\nline two", "[DONE]"]


def _feed(parser: SSEParser | LineParser, raw: bytes, cuts: list[int]) -> list[str]:
    out: list[str] = []
    prev = 0
    for c in [*cuts, len(raw)]:
        out += parser.feed(raw[prev:c])
        prev = c
    return out + parser.close()


def test_whole_body() -> None:
    assert _feed(SSEParser(), STREAM, []) == EXPECTED


def test_every_single_cut_point() -> None:
    for i in range(len(STREAM) + 1):
        assert _feed(SSEParser(), STREAM, [i]) == EXPECTED, i


@pytest.mark.parametrize("seed", range(20))
def test_random_cuts_including_inside_utf8(seed: int) -> None:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(STREAM)), rng.randint(1, 30)))
    assert _feed(SSEParser(), STREAM, cuts) == EXPECTED


def test_final_event_without_blank_line_still_counts() -> None:
    assert _feed(SSEParser(), b"data: a\n\ndata: b", []) == ["a", "b"]


def test_byte_by_byte() -> None:
    assert _feed(SSEParser(), STREAM, list(range(1, len(STREAM)))) == EXPECTED


def test_jsonlines() -> None:
    raw = '{"a": 1}\n{"b": "\u2713"}\r\n\n{"c": 3}'.encode()
    expected = ['{"a": 1}', '{"b": "\u2713"}', '{"c": 3}']
    for i in range(len(raw) + 1):
        assert _feed(LineParser(), raw, [i]) == expected


def test_a_comment_does_not_hide_the_events_after_it_in_the_same_chunk() -> None:
    parser = SSEParser()
    assert parser.feed(b": keep-alive\n\ndata: a\n\n:ping\ndata: b\n\n") == ["a", "b"]


def test_close_ends_a_pending_event_whose_lines_are_complete() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\ndata: b\n") == []
    assert parser.close() == ["a\nb"]
    assert parser.close() == []


def test_json_lines_keep_everything_but_the_line_ending() -> None:
    parser = LineParser()
    assert parser.feed(b'{"a": 1}  \r\n\r\nTAX\r\n {"b"') == ['{"a": 1}  ', "TAX"]
    assert parser.close() == [' {"b"']
    assert parser.close() == []


def test_json_lines_close_drops_a_blank_tail() -> None:
    parser = LineParser()
    assert parser.feed(b'{"a": 1}\n  ') == ['{"a": 1}']
    assert parser.close() == []
