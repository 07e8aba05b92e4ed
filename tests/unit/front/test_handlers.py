"""front/handlers.py beyond the routes' own tests (test_app.py, test_gate.py, ...): a handler takes the
body the gate already read and never reads it again, falls back to reading it (and its limit) when
the gate did not, and an unexpected error is a 500 in the one shape with one log line whose path
cannot forge a field."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request

from neuronserve.front.errors import PayloadTooLarge
from neuronserve.front.gate import BODY_KEY
from neuronserve.front.handlers import body_of, guarded, header_values


def _request(scope_extra: dict[str, Any], messages: list[dict[str, Any]]) -> Request:
    async def receive() -> dict[str, Any]:
        if not messages:
            raise AssertionError("the body was read twice")
        return messages.pop(0)

    scope = {"type": "http", "method": "POST", "path": "/x", "headers": [], **scope_extra}
    return Request(scope, receive)


def test_the_gates_body_is_taken_as_it_is() -> None:
    request = _request({BODY_KEY: b'{"a": 1}'}, [])
    assert asyncio.run(body_of(request, 100)) == b'{"a": 1}'


def test_without_the_gates_body_it_is_read_and_limited() -> None:
    request = _request(
        {},
        [{"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.request", "body": b"c"}],
    )
    assert asyncio.run(body_of(request, 100)) == b"abc"
    over = _request({BODY_KEY: b"x" * 11}, [{"type": "http.request", "body": b"x" * 11}])
    with pytest.raises(PayloadTooLarge):
        asyncio.run(body_of(over, 10))


def test_an_unexpected_error_is_a_500_and_one_escaped_log_line(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(_: Request) -> Any:
        raise KeyError("boom")

    request = _request({"raw_path": b"/x%20status=200"}, [])
    with caplog.at_level(logging.ERROR, logger="neuronserve.front"):
        resp = asyncio.run(guarded(broken)(request))
    assert resp.status_code == 500 and b"internal error in the front" in resp.body
    [line] = caplog.messages
    assert line == "front error on POST /x%20status%3D200: KeyError: 'boom'"


_NAMES = [b"content-type", b"accept", b"x-amzn-sagemaker-custom-attributes", b"x-other"]


@given(
    st.lists(
        st.tuples(st.sampled_from([*_NAMES, b"host", b"content-length"]), st.binary(max_size=12)), max_size=12
    )
)
def test_header_values_reads_what_starlettes_headers_read(headers: list[tuple[bytes, bytes]]) -> None:
    """One pass for several names gives, for each, what `request.headers.get(name)` gives: the first
    value, latin-1 decoded (duplicates, absent names and non-ASCII bytes included)."""
    wanted = frozenset(_NAMES[:3])
    found = header_values({"headers": headers}, wanted)
    starlette = Request({"type": "http", "headers": headers})
    for name in _NAMES:
        expected = starlette.headers.get(name.decode()) if name in wanted else None
        assert found.get(name) == expected
