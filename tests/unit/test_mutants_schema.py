"""front/schema.py cases that mutation testing showed unchecked (issue #16, docs/TESTING.md): the exact
400/415 messages a client gets, where the JSON nesting limit sits (64 levels pass, 65 are refused), which
part of a content type with several parameters is the MIME type, and how a custom-attributes header
without spaces or with an `=` inside the route value is read."""

from __future__ import annotations

import pytest

from neuronserve.front import schema
from neuronserve.front.errors import ACCEPTED_SHAPES, FrontError

TOO_DEEP = "the JSON body is nested too deeply (limit 64 levels)"


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
