"""The one JSON error shape of everything the front answers itself."""

from __future__ import annotations

import json

import pytest

from neuronserve.front.errors import ERROR_TYPES, error_body, error_bytes


@pytest.mark.parametrize("status", [400, 413, 415, 422, 429, 503, 504])
def test_every_front_status_has_a_type_and_one_shape(status: int) -> None:
    body = error_body(status, "why")
    assert body == {"error": {"message": "why", "type": ERROR_TYPES[status], "code": status}}
    assert json.loads(error_bytes(status, "why")) == body
