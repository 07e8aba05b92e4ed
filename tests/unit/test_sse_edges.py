"""Edge cases of the front's SSE and JSON Lines parsers, one per rule (added where mutation testing
showed a rule no test exercised: docs/TESTING.md)."""

from __future__ import annotations

from neuronserve.front.sse import LineParser, SSEParser


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
