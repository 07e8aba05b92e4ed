"""Typed front errors, the one table from error to status, and the one JSON error shape."""

from __future__ import annotations

import json

import pytest
from starlette.responses import JSONResponse

from neuronserve.front import errors
from neuronserve.front.errors import ERROR_TYPES, error_body, error_bytes
from neuronserve.front.metrics import REJECT_REASONS


@pytest.mark.parametrize("status", [400, 413, 415, 422, 429, 503, 504])
def test_every_front_status_has_a_type_and_one_shape(status: int) -> None:
    body = error_body(status, "why")
    assert body == {"error": {"message": "why", "type": ERROR_TYPES[status], "code": status}}
    assert json.loads(error_bytes(status, "why")) == body


@pytest.mark.parametrize(
    ("err", "status"),
    [
        (errors.BadRequest("x"), 400),
        (errors.NotFound("x"), 404),
        (errors.MethodNotAllowed("x"), 405),
        (errors.PayloadTooLarge("x"), 413),
        (errors.UnsupportedMediaType("x"), 415),
        (errors.Invalid("x"), 422),
        (errors.Overloaded("x"), 429),
        (errors.EngineBadAnswer("x"), 502),
        (errors.NotReady("x"), 503),
        (errors.EngineUnreachable("x"), 503),
        (errors.EngineTimeout("x"), 504),
        (errors.EngineRefused(418, "x"), 418),  # the engine's own status, kept
        (errors.EngineFailure("x"), 500),  # no row of its own: a front bug, not a refusal
    ],
)
def test_every_typed_error_answers_one_status(err: errors.FrontError, status: int) -> None:
    assert err.status == status and err.message == "x"


def test_one_table_names_each_status_for_every_body() -> None:
    """The one shape's "type" and TGI's "error_type" are two columns of the same table."""
    assert {s: n.front for s, n in errors.STATUSES.items() if n.front} == errors.ERROR_TYPES
    assert errors.TGI_ERROR_TYPES == {
        422: "validation",
        424: "generation",
        429: "overloaded",
        503: "unhealthy",
    }
    assert set(errors.STATUS.values()) <= set(errors.ERROR_TYPES)


def test_handler_refusals_are_counted_by_status_from_the_same_table() -> None:
    assert errors.REJECTED_REASONS == {
        400: "bad_request",
        404: "not_found",
        413: "payload",
        415: "bad_request",
        422: "bad_request",
    }
    assert set(errors.REJECTED_REASONS.values()) <= set(REJECT_REASONS)


@pytest.mark.parametrize("status", sorted(ERROR_TYPES))
@pytest.mark.parametrize("message", ["too many requests in flight (limit 4); retry later", 'ünï "q" \n'])
def test_error_bytes_are_the_json_response_every_other_error_is(status: int, message: str) -> None:
    """The gate's own refusals (429, 503, 413...) read byte for byte like the handlers' JSONResponse."""
    assert error_bytes(status, message) == JSONResponse(error_body(status, message)).body
