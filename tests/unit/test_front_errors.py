"""The one error table, content type checks and schema classification."""

from __future__ import annotations

import json

import pytest

from neuronserve.front import schema
from neuronserve.front.errors import ERROR_TYPES, FrontError, error_body, error_bytes


@pytest.mark.parametrize("status", [400, 413, 415, 422, 429, 503, 504])
def test_every_front_status_has_a_type_and_one_shape(status: int) -> None:
    body = error_body(status, "why")
    assert body == {"error": {"message": "why", "type": ERROR_TYPES[status], "code": status}}
    assert json.loads(error_bytes(status, "why")) == body


@pytest.mark.parametrize(
    "ctype", [None, "", "application/json", "application/json; charset=utf-8", "application/vnd.x+json"]
)
def test_json_content_types_pass(ctype: str | None) -> None:
    schema.check_content_type(ctype)


@pytest.mark.parametrize(
    "ctype", ["text/plain", "application/x-www-form-urlencoded", "application/octet-stream"]
)
def test_other_content_types_are_415(ctype: str) -> None:
    with pytest.raises(FrontError) as err:
        schema.check_content_type(ctype)
    assert err.value.status == 415


@pytest.mark.parametrize("raw", [b"{", b"[1, 2]", b'"text"', b"\xff\xfe"])
def test_bad_bodies_are_400_listing_the_shapes(raw: bytes) -> None:
    with pytest.raises(FrontError) as err:
        schema.parse_body(raw)
    assert err.value.status == 400
    assert "messages" in err.value.message and "inputs" in err.value.message


@pytest.mark.parametrize(
    ("body", "kind", "path"),
    [
        ({"messages": [], "prompt": "x"}, "chat", "/v1/chat/completions"),  # chat wins, as in vLLM
        ({"prompt": "x"}, "completion", "/v1/completions"),
        ({"inputs": "x"}, "tgi", "/v1/completions"),
    ],
)
def test_classify(body: dict[str, object], kind: str, path: str) -> None:
    assert schema.classify(body) == (kind, path)


def test_unknown_schema_is_400() -> None:
    with pytest.raises(FrontError) as err:
        schema.classify({"text": "x"})
    assert err.value.status == 400 and "unknown request schema" in err.value.message


@pytest.mark.parametrize(
    ("header", "route"),
    [
        (None, None),
        ("route=/v1/completions", "/v1/completions"),
        ("a=1; route=/v1/embeddings ;b=2", "/v1/embeddings"),
        ("trace_id=abc", None),
    ],
)
def test_route_from_custom_attributes(header: str | None, route: str | None) -> None:
    assert schema.route_from_attributes(header) == route


@pytest.mark.parametrize("header", ["route=/admin", "route=/v1/../x", "route="])
def test_bad_routes_are_400(header: str) -> None:
    with pytest.raises(FrontError) as err:
        schema.route_from_attributes(header)
    assert err.value.status == 400
