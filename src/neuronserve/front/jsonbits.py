"""JSON values for fixed byte templates, exactly as `json.dumps(..., ensure_ascii=False)` writes them.

Why: a streamed TGI or LMI answer is one small JSON object per token, and `json.dumps` with a
non-default option builds a JSONEncoder and a C encoder per call (several microseconds, the largest
part of a reframed event: docs/PERFORMANCE.md, "Front ceiling"). The event shapes are fixed, so
tgi.py and lmi.py write the fixed parts once and only the values per event, with the json module's
own functions for what varies: `encode_basestring` (the string encoder json uses when ensure_ascii is
off), `int.__repr__` and `float.__repr__` (what its encoder calls for numbers). Anything else (a NaN,
a container, a subclass) goes through `ENCODE`, the same encoder json.dumps would build. The test
(tests/unit/front/test_jsonbits.py) compares the two over random values.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring
from typing import Any

from starlette.responses import JSONResponse

ENCODE = json.JSONEncoder(ensure_ascii=False).encode  # what json.dumps(x, ensure_ascii=False) calls
# What Starlette's JSONResponse.render calls json.dumps with, built once (json.dumps with any option
# but the defaults builds an encoder per call).
COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


class JsonAnswer(JSONResponse):
    """JSONResponse, byte for byte, with its encoder built once."""

    def render(self, content: Any) -> bytes:
        return COMPACT(content).encode("utf-8")


def value(v: Any) -> str:
    """`v` as json.dumps(v, ensure_ascii=False) writes it."""
    t = type(v)
    if t is str:
        text: str = encode_basestring(v)
        return text
    if t is int:
        return int.__repr__(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if t is float and math.isfinite(v):
        return float.__repr__(v)
    return ENCODE(v)
