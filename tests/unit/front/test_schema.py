"""Which request shape a body is: content type checks, JSON depth, schema classification, routed requests.

The exact 400/415 messages, the nesting limit's edge (64 levels pass, 65 are refused), multi-parameter
content types and custom-attribute parsing came from mutation testing (docs/TESTING.md)."""

from __future__ import annotations

import pytest

from neuronserve.front import schema
from neuronserve.front.errors import ACCEPTED_SHAPES, FrontError

TOO_DEEP = "the JSON body is nested too deeply (limit 64 levels)"


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


def nested(levels: int, inner: bytes = b"1") -> bytes:
    """`levels` nested JSON containers, alternating lists and objects, around `inner`."""
    raw = inner
    for level in range(levels):
        raw = b"[" + raw + b"]" if level % 2 else b'{"k": ' + raw + b"}"
    return raw


def test_sixty_four_levels_of_json_are_accepted() -> None:
    """MAX_DEPTH is 64 levels, counting the outer object as the first: a body nested exactly that deep
    (lists and objects mixed) is parsed and returned as is."""
    value = schema.load_json(nested(64))
    assert schema.too_deep(value) is False
    assert schema.too_deep([1, "x", {"a": None}]) is False


@pytest.mark.parametrize("levels", [65, 66, 200])
def test_deeper_json_is_refused_with_the_limit_named(levels: int) -> None:
    """65 levels or more (still shallow enough for Python's own parser) is a 400 naming the limit: the
    check after parsing is what enforces MAX_DEPTH, not the parser's recursion limit."""
    with pytest.raises(FrontError) as err:
        schema.load_json(nested(levels))
    assert (err.value.status, err.value.message) == (400, TOO_DEEP)
    assert schema.too_deep(schema.load_json(nested(3)), limit=2) is True


def test_a_body_too_deep_for_the_parser_gets_the_same_refusal() -> None:
    """100,000 levels exhaust Python's parser: the same 400, not a 500."""
    with pytest.raises(FrontError) as err:
        schema.load_json(b"[" * 100_000 + b"]" * 100_000)
    assert (err.value.status, err.value.message) == (400, TOO_DEEP)


def test_a_content_type_with_several_parameters_is_judged_by_its_mime_type() -> None:
    """Only what precedes the first `;` is the MIME type: `application/json; charset=utf-8; x=y` is
    JSON, and `text/plain; charset=utf-8; x=y` is refused naming `text/plain` alone."""
    schema.check_content_type("Application/JSON; charset=utf-8; x=y")
    schema.check_content_type("text/json")
    schema.check_content_type("application/problem+json")
    with pytest.raises(FrontError) as err:
        schema.check_content_type("text/plain; charset=utf-8; x=y")
    assert (err.value.status, err.value.message) == (
        415,
        "unsupported content type 'text/plain': send application/json",
    )


def test_an_unknown_schema_lists_at_most_ten_of_its_keys() -> None:
    """The 400 for a body that is no known shape shows its first ten keys, sorted, then the shapes."""
    body = {f"k{i:02d}": i for i in range(12)}
    with pytest.raises(FrontError) as err:
        schema.classify(body)
    keys = [f"k{i:02d}" for i in range(10)]
    assert err.value.message == f"unknown request schema (keys: {keys}); accepted shapes: {ACCEPTED_SHAPES}"


def test_a_body_that_is_no_json_object_is_refused_listing_the_shapes() -> None:
    """A JSON array is valid JSON but no request: the 400 says a JSON object is needed."""
    with pytest.raises(FrontError) as err:
        schema.parse_body(b"[1, 2]")
    assert err.value.message == f"the body must be a JSON object; accepted shapes: {ACCEPTED_SHAPES}"


@pytest.mark.parametrize(
    ("header", "route"),
    [
        ("trace=1;route=/v1/embeddings", "/v1/embeddings"),  # no spaces around the `;`
        ("route=/v1/completions?echo=true", "/v1/completions?echo=true"),  # `=` inside the value kept
        (" route = /v1/models ", "/v1/models"),
    ],
)
def test_custom_attribute_route_values(header: str, route: str) -> None:
    """Pairs are split on `;` (spaces optional) and each pair on its first `=`, so a route value holding
    `=` reaches the allowlist whole instead of being ignored."""
    assert schema.route_from_attributes(header) == route


def test_a_bad_route_is_refused_quoting_it() -> None:
    """The 400 quotes the route the client sent and says what a route must look like."""
    with pytest.raises(FrontError) as err:
        schema.route_from_attributes("route=/admin")
    assert (err.value.status, err.value.message) == (
        400,
        "custom attribute route='/admin': the route must start with /v1/",
    )


def test_the_bracket_count_only_skips_the_walk_when_nothing_can_be_too_deep() -> None:
    """schema.loads skips the depth walk for a text with at most MAX_DEPTH opening brackets (a value
    N deep has at least N); brackets inside strings or side by side only make it walk."""
    shallow = b'{"a": "' + b"[{" * 200 + b'", "b": [' + b"[1], " * 300 + b"[2]]}"
    assert schema.loads(shallow)["b"][-1] == [2]
    hidden = b'{"s": "' + b"{" * 10 + b'", "v": ' + nested(65) + b"}"
    with pytest.raises(schema.TooDeep):
        schema.loads(hidden)
    with pytest.raises(schema.TooDeep):
        schema.loads(nested(65).decode())
