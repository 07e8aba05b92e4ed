"""Whole numbers written by people: one reading for every setting that takes a count.

Why one module: the same two mistakes kept coming back wherever a count was parsed by hand.
`str.isdigit` accepts "²", which `int()` then refuses with a ValueError traceback, and
`int()` alone accepts "1_0" and " 8 ". `isdecimal` then `int` is the reading every caller shares;
each caller keeps its own bounds and its own message (which names the variable to change).
"""

from __future__ import annotations


def whole(text: str) -> int | None:
    """`text` (surrounding blanks ignored) as a whole number >= 0, or None when it is not one."""
    text = text.strip()
    return int(text) if text.isdecimal() else None


def positive(text: str, least: int = 1) -> int | None:
    """`text` as a whole number >= `least` (a count of something: 1 unless said), or None."""
    value = whole(text)
    return value if value is not None and value >= least else None
