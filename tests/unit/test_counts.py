"""The one reading of a count (neuronserve.counts): what passes, and the inputs that once crashed int()."""

from __future__ import annotations

import pytest

from neuronserve.counts import positive, whole


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0", 0),
        ("8", 8),
        (" 16 ", 16),
        ("007", 7),
        ("", None),
        ("²", None),
        ("1_0", None),
        ("-1", None),
        ("+1", None),
        ("1.5", None),
        ("eight", None),
        ("1e3", None),
        ("nan", None),
        ("inf", None),
        ("٣", None),  # int() reads other scripts' digits; a setting is written in ASCII
        ("9" * 5000, None),  # more digits than int() converts: not a count, and no ValueError
        ("12345678901234567890", 12345678901234567890),
    ],
)
def test_whole(text: str, want: int | None) -> None:
    assert whole(text) == want


@pytest.mark.parametrize(
    ("text", "least", "want"),
    [("1", 1, 1), ("0", 1, None), ("0", 0, 0), ("3", 4, None), ("4", 4, 4), ("²", 1, None)],
)
def test_positive(text: str, least: int, want: int | None) -> None:
    assert positive(text, least) == want
