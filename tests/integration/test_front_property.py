"""Property: no body, of any accepted shape or mutated from one, makes the front answer 5xx.

Hypothesis generates TGI/LMI generate bodies (every parameter name, values of every JSON type),
OpenAI chat and completion bodies with odd model names and fields, and byte-level mutations
(truncated, deeply nested, not UTF-8), and sends them to every route the front answers, with
every method. Bounded (max_examples, small max tokens) to cost well under a minute on the tiny
model. Afterwards the server still answers /ping and a plain request.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.server import Server

from neuronserve.front.genparams import PARAMETERS

pytestmark = pytest.mark.integration

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same examples every run: a failure reproduces
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
GENERATE_ROUTES = ("/invocations", "/generate", "/generate_stream", "/")
OPENAI_ROUTES = ("/invocations", "/v1/completions", "/v1/chat/completions")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=6),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-4, max_value=4),
    st.text(max_size=8),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
# Values a parameter plausibly gets (kept small: max_new_tokens never asks for long generations)
param_values = st.one_of(
    scalars,
    st.lists(st.text(max_size=3), max_size=3),
    st.sampled_from(
        [
            {"type": "regex", "value": "[ab]{2}"},
            {"type": "json", "value": {"type": "boolean"}},
            {"type": "json_schema", "value": {"name": "x", "schema": {"type": "integer"}}},
            {"type": "regex", "value": "("},
            {"type": "json", "value": {"type": "nonsense"}},
        ]
    ),
    json_values,
)
generate_bodies = st.fixed_dictionaries(
    {"inputs": st.one_of(st.text(max_size=20), st.lists(st.text(max_size=6), max_size=3), json_values)},
    optional={
        "parameters": st.one_of(
            st.dictionaries(st.sampled_from(sorted(PARAMETERS)), param_values, max_size=5),
            st.dictionaries(st.text(max_size=6), json_values, max_size=2),
            json_values,
        ),
        "stream": st.one_of(st.booleans(), json_values),
    },
)
messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "system", "tool", "x"]),
            "content": st.one_of(st.text(max_size=10), json_values),
        }
    ),
    max_size=3,
)
openai_bodies = st.one_of(
    st.fixed_dictionaries(
        {"prompt": st.one_of(st.text(max_size=10), json_values)},
        optional={
            "model": st.one_of(st.text(max_size=6), json_values),
            "max_tokens": st.integers(min_value=-1, max_value=4),
            "stream": st.booleans(),
            "logprobs": st.integers(min_value=-1, max_value=3),
            "temperature": scalars,
            "n": st.integers(min_value=0, max_value=2),
        },
    ),
    st.fixed_dictionaries(
        {"messages": st.one_of(messages, json_values)},
        optional={
            "model": st.one_of(st.text(max_size=6), json_values),
            "max_tokens": st.integers(min_value=-1, max_value=4),
            "stream": st.booleans(),
            "logprobs": scalars,
        },
    ),
)


def _mutations(raw: bytes) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.just(raw),
        st.integers(min_value=0, max_value=max(len(raw) - 1, 0)).map(lambda n: raw[:n]),
        st.integers(min_value=1, max_value=200_000).map(lambda d: b"[" * d + b"]" * d),
        st.integers(min_value=1, max_value=200_000).map(lambda d: b'{"inputs": ' + b"[" * d),
        st.binary(max_size=30),
        st.just(raw.replace(b'"', b"'")),
    )


def _check(r: httpx.Response) -> None:
    assert r.status_code < 500, (r.status_code, r.text[:500])
    if r.status_code >= 400:
        body = r.json()
        assert isinstance(body, dict) and "error" in body, r.text[:300]


def _send(client: httpx.Client, method: str, path: str, content: bytes) -> None:
    with client.stream(method, path, content=content, headers={"content-type": "application/json"}) as r:
        r.read()  # a stream must end; its in-band events are the engine's answer
    _check(r)


@pytest.fixture
def client(server: Server) -> Any:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


@SETTINGS
@given(body=generate_bodies, route=st.sampled_from(GENERATE_ROUTES), data=st.data())
def test_generate_bodies_never_5xx(client: httpx.Client, body: dict[str, Any], route: str, data: Any) -> None:
    raw = json.dumps(body).encode()
    _send(client, "POST", route, data.draw(_mutations(raw)))


@SETTINGS
@given(body=openai_bodies, route=st.sampled_from(OPENAI_ROUTES), data=st.data())
def test_openai_bodies_never_5xx(client: httpx.Client, body: dict[str, Any], route: str, data: Any) -> None:
    raw = json.dumps(body).encode()
    _send(client, "POST", route, data.draw(_mutations(raw)))


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
    path=st.sampled_from([*GENERATE_ROUTES, "/info", "/health", "/ping", "/v1/models", "/v1/completions"]),
)
def test_every_method_on_every_route_never_5xx(client: httpx.Client, method: str, path: str) -> None:
    r = client.request(method, path, content=b"{}", headers={"content-type": "application/json"})
    assert r.status_code < 500, (method, path, r.status_code, r.text[:300])


def test_server_still_up_after_the_properties(server: Server) -> None:
    assert httpx.get(f"{server.url}/ping", timeout=10).status_code == 200
    r = httpx.post(
        f"{server.url}/generate", json={"inputs": "hello", "parameters": {"max_new_tokens": 2}}, timeout=60
    )
    assert r.status_code == 200, r.text
