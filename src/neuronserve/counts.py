"""Whole numbers written by people: one reading for every setting that takes a count.

Why one module: the same mistakes kept coming back wherever a count was parsed by hand.
`str.isdigit` accepts "²", which `int()` then refuses with a ValueError traceback; `int()` alone
accepts "1_0" and " 8 "; `int(float(text))` accepts "nan" (and crashes), "inf", "1e3" and "8080.9".
ASCII decimal digits, then `int`, is the reading every caller shares; each caller keeps its own bounds
and its own message (which names the variable to change).
"""

from __future__ import annotations


def whole(text: str) -> int | None:
    """`text` (surrounding blanks ignored) as a whole number >= 0 written in ASCII digits, or None.

    No sign, no fraction, no exponent, no `_`, no other script's digits (`int("٣")` is 3). A number
    with more digits than `int()` converts (sys.get_int_max_str_digits, 4300 by default) is None too,
    not a ValueError: no count is that large.
    """
    text = text.strip()
    if not (text.isascii() and text.isdecimal()):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def positive(text: str, least: int = 1) -> int | None:
    """`text` as a whole number >= `least` (a count of something: 1 unless said), or None."""
    value = whole(text)
    return value if value is not None and value >= least else None
