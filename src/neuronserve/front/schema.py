"""Which request shape a /invocations body is, and which engine route serves it. Pure."""

from __future__ import annotations

import json
from typing import Any, Literal

from neuronserve.front.errors import ACCEPTED_SHAPES, BadRequest, UnsupportedMediaType

Kind = Literal["chat", "completion", "tgi", "routed"]

_JSON_TYPES = ("application/json", "text/json")
MAX_DEPTH = 64  # nesting levels of a JSON body; no request schema needs more than a handful


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Nesting deeper than `limit` (iterative: a deep body must not exhaust our own stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


class TooDeep(ValueError):
    """JSON nested deeper than MAX_DEPTH (or so deep that Python's recursive parser gave up)."""


def loads(raw: bytes | str) -> Any:
    """The one parse of bytes a client (or the engine) sent: every failure is a ValueError.

    Why one function: `json.loads` raises RecursionError (not a ValueError) on deep nesting, and
    UnicodeDecodeError on bytes that are not UTF-8; a caller that catches only ValueError then lets
    a hostile body become a 500. Here a too-deep value is `TooDeep`, invalid UTF-8 a ValueError
    (UnicodeDecodeError is one), an over-long integer literal too (CPython's digit limit)."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise TooDeep(f"nested too deeply (limit {MAX_DEPTH} levels)") from None
    if _brackets(raw) > MAX_DEPTH and too_deep(value):
        raise TooDeep(f"nested too deeply (limit {MAX_DEPTH} levels)")
    return value


def _brackets(raw: bytes | str) -> int:
    """Opening brackets in the text, strings included: a value nested N deep has at least N, so at
    most MAX_DEPTH of them cannot be too deep, and the walk over the parsed value (too_deep, the
    larger cost of a small body's parse) is skipped. Two C-level counts."""
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{")
    return raw.count(b"[") + raw.count(b"{")


def load_json(raw: bytes) -> Any:
    """Parse a JSON body; 400 for bodies too deep to parse (Python's parser recurses) or nested
    past MAX_DEPTH. ValueError for anything else that is not JSON (callers decide)."""
    try:
        return loads(raw)
    except TooDeep:
        raise BadRequest(f"the JSON body is nested too deeply (limit {MAX_DEPTH} levels)") from None


def check_content_type(content_type: str | None) -> None:
    """JSON only (a missing type is taken as JSON, as SageMaker clients often omit it)."""
    if not content_type:
        return
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime in _JSON_TYPES or (mime.startswith("application/") and mime.endswith("+json")):
        return
    raise UnsupportedMediaType(f"unsupported content type {mime!r}: send application/json")


def parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = load_json(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise BadRequest(f"malformed JSON body ({err}); accepted shapes: {ACCEPTED_SHAPES}") from None
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a JSON object; accepted shapes: {ACCEPTED_SHAPES}")
    return body


def route_from_attributes(custom_attributes: str | None) -> str | None:
    """`X-Amzn-SageMaker-Custom-Attributes: route=/v1/...` (other `k=v` pairs, `;`-separated, ignored)."""
    if not custom_attributes:
        return None
    for part in custom_attributes.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key.strip() == "route":
            route = value.strip()
            if not route.startswith("/v1/") or ".." in route:
                raise BadRequest(f"custom attribute route={route!r}: the route must start with /v1/")
            return route
    return None


def classify(body: dict[str, Any]) -> tuple[Kind, str]:
    """(kind, engine path). Chat first, then completion, then TGI, as vLLM's own /invocations does."""
    if "messages" in body:
        return "chat", "/v1/chat/completions"
    if "prompt" in body:
        return "completion", "/v1/completions"
    if "inputs" in body:
        return "tgi", "/v1/completions"
    raise BadRequest(
        f"unknown request schema (keys: {sorted(body)[:10]}); accepted shapes: {ACCEPTED_SHAPES}"
    )
