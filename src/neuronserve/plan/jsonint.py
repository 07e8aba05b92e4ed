"""Whole numbers as JSON has them, for the counts the plan reads from config.json and override objects."""

from __future__ import annotations

from typing import TypeGuard


def json_int(value: object) -> TypeGuard[int]:
    """An int that is no bool: Python counts True as 1, but JSON `true` is no number, so
    `"num_hidden_layers": true` or a bucket list `[true]` must not pass as a count."""
    return isinstance(value, int) and not isinstance(value, bool)
