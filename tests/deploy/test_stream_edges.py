"""The deploy stream client's edge cases, one per rule (added where mutation testing showed a rule no
test exercised: docs/TESTING.md). Literal inputs, literal expected values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from neuronserve.deploy.stream import (
    LineBuffer,
    StreamError,
    events,
    lines_from_parts,
    payload_parts,
    text_of,
)


def test_a_last_line_ending_in_cr_loses_only_the_cr() -> None:
    buffer = LineBuffer()
    assert buffer.feed(b"data: 1\r\nXdata: 2X\r") == [b"data: 1"]
    assert buffer.flush() == [b"Xdata: 2X"]
    assert list(lines_from_parts([b"\rfirst\r\n", b"last\r"])) == ["\rfirst", "last"]


def test_unknown_events_are_skipped() -> None:
    stream = [{"PayloadPart": {"Bytes": b"a"}}, {"SomethingNew": {}}, {"PayloadPart": {"Bytes": b"b"}}]
    assert list(payload_parts(stream)) == [b"a", b"b"]


def test_sse_comments_and_fields_other_than_data_are_skipped() -> None:
    lines = [
        ": keep-alive",
        "event: message",
        'data: {"choices": [{"text": "a"}]}',
        "id: 7",
        "retry: 1000",
        "",
        'data: {"choices": [{"text": "b"}]}',
        "data: [DONE]",
        'data: {"choices": [{"text": "after done"}]}',
    ]
    assert "".join(text_of(e) for e in events(lines)) == "ab"


def test_json_lines_are_events_too() -> None:
    lines = ['{"token": {"text": "x", "special": false}}', "  ", '{"token": {"text": "y", "special": false}}']
    assert [text_of(e) for e in events(lines)] == ["x", "y"]


@pytest.mark.parametrize(
    ("event", "text"),
    [
        ({"token": {"id": 3, "special": False}}, ""),  # a token event without text
        ({"token": {"id": 2, "text": "</s>", "special": True}}, ""),
        ({"token": {"id": 5, "text": " Paris"}}, " Paris"),
        ({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}, ""),
        ({"generated_text": "whole"}, ""),
        (["not", "an", "event"], ""),
    ],
)
def test_text_of_each_event_kind(event: object, text: str) -> None:
    assert text_of(event) == text


def _failing(exc: BaseException) -> Iterator[dict[str, object]]:
    yield {"PayloadPart": {"Bytes": b"data: 1\n"}}
    raise exc


@pytest.mark.parametrize(
    ("response", "message"),
    [
        ({}, "EventStreamError: (the endpoint failed mid-stream; its logs say why)"),
        (
            {"Error": {"Code": "ModelStreamError"}},
            "ModelStreamError: (the endpoint failed mid-stream; its logs say why)",
        ),
        (
            {"Error": {"Message": "boom"}},
            "EventStreamError: boom (the endpoint failed mid-stream; its logs say why)",
        ),
    ],
)
def test_stream_errors_with_missing_fields(response: dict[str, Any], message: str) -> None:
    from botocore.exceptions import EventStreamError

    got: list[bytes] = []
    with pytest.raises(StreamError) as err:
        got.extend(payload_parts(_failing(EventStreamError(response, "InvokeEndpointWithResponseStream"))))
    assert str(err.value) == message
    assert got == [b"data: 1\n"]


def test_a_broken_response_stream_is_one_stream_error() -> None:
    from botocore.exceptions import ResponseStreamingError

    with pytest.raises(StreamError) as err:
        list(payload_parts(_failing(ResponseStreamingError(error="connection reset"))))
    assert str(err.value).startswith("response stream broken: ") and "connection reset" in str(err.value)
