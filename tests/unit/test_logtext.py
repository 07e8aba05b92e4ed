"""logtext: what a log line may carry of what clients sent (one event one line; a value inside its
own field). How the formats, the engine relay and the last words use `escape`: test_logsetup.py."""

from __future__ import annotations

from neuronserve import logtext
from neuronserve.logtext import field


def test_printable_text_is_left_alone() -> None:
    for text in ("plain", "tab-free ünïcode 字 and \\x0a as typed", ""):
        assert logtext.escape(text) == text


def test_a_field_value_cannot_end_its_field_or_start_another() -> None:
    """logtext.field: the path as the client encoded it, `=`, spaces, quotes, backslashes and bytes
    outside printable ASCII as %XX; what a key=value reader splits on never survives."""
    assert field(b"/v1/models") == "/v1/models" and field("GET") == "GET"
    assert field(b"/x%20status=200%20request_id=FORGED") == "/x%20status%3D200%20request_id%3DFORGED"
    assert field('a b"c\\d\te') == "a%20b%22c%5Cd%09e"
    assert field(b"/\xe9") == "/%E9" and field("é") == "%C3%A9"  # wire bytes as they came; text as UTF-8
    for raw in (bytes(range(256)), "ünï code=1 \u2028 x".encode()):
        out = field(raw)
        assert not set(out) & set(' ="\\\n\r\t') and out.isascii() and out.isprintable()


def test_field_remembers_at_most_its_bound() -> None:
    for i in range(logtext._FIELDS_MAX * 3):
        assert logtext.field(f"/p{i} x") == f"/p{i}%20x"
    assert len(logtext._FIELDS) <= logtext._FIELDS_MAX
    assert logtext.field(b"/a b") == "/a%20b" and logtext.field("/a b") == "/a%20b"
