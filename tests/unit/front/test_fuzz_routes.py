"""Fuzz: hostile bytes on every route of the route table, in every dialect, never make the front 5xx.

The real front (app, gate and the sticky-session wrapper, tests/support/front_app.py) runs in front
of the stand-in engine, which answers every request 200, so any 5xx is the front's own. Hypothesis
sends random JSON (deep nesting, huge numbers, wrong types, unicode), generate and OpenAI bodies with
random parameters, byte mutations (not UTF-8, truncated, nested past any limit) and odd headers
(content types, session ids, custom-attribute routes) to each route of routes.TABLE with its methods
and a wrong one, once with the TGI dialect on /invocations and once with LMI's. Property: the status
is below 500, and every error is a JSON body in the route's shape. Bounded: derandomized, a fixed
number of examples, well under 30 s on two cores.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.front_app import Front, running_front

from neuronserve.front import advisories, routes
from neuronserve.front.genparams import PARAMETERS
from neuronserve.front.sessions import SessionStore

EXAMPLES = 120
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples every run: a failure reproduces
    database=None,
    suppress_health_check=list(HealthCheck),
)
TGI_ROUTES = ("/generate", "/generate_stream", "/")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=70),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "\u0000", "\ud7ff\ufeff", "NEW_SESSION", "CLOSE", "x" * 300]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)
params = st.dictionaries(st.sampled_from([*PARAMETERS, "nonsense"]), json_values, max_size=5)
messages = st.one_of(
    json_values,
    st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "system", "bogus"]), "content": json_values},
        ),
        max_size=3,
    ),
)
tgi_bodies = st.fixed_dictionaries(
    {"inputs": st.one_of(st.text(max_size=8), st.lists(st.text(max_size=3), max_size=40), json_values)},
    optional={"parameters": st.one_of(params, json_values), "stream": json_values},
)
openai_bodies = st.fixed_dictionaries(
    {},
    optional={
        "messages": messages,
        "prompt": st.one_of(st.text(max_size=8), st.lists(st.text(max_size=2), max_size=70), json_values),
        "n": json_values,
        "best_of": json_values,
        "model": json_values,
        "chat_template_kwargs": st.one_of(
            json_values,
            st.dictionaries(st.sampled_from([*advisories.SAFE_TEMPLATE_KWARGS, "tokenize"]), json_values),
        ),
        "prompt_embeds": json_values,
        "requestType": json_values,
        "max_tokens": st.integers(min_value=1, max_value=4),
    },
)
session_bodies = st.fixed_dictionaries({"requestType": json_values})


def _encode(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


def _deep(depth: int, kind: str) -> bytes:
    if kind == "list":
        return b"[" * depth + b"]" * depth
    if kind == "grammar":  # a TGI json grammar whose value is a deeply nested JSON string
        inner = "[" * depth + "]" * depth
        return _encode({"inputs": "x", "parameters": {"grammar": {"type": "json", "value": inner}}})
    if kind == "session":
        return b'{"requestType": ' + b"[" * depth + b"]" * depth + b"}"
    return b'{"inputs": "x", "parameters": {"stop": ' + b"[" * depth + b"]" * depth + b"}}"


# Every one of these goes to every route, method and dialect (the deterministic sweep below).
HOSTILE = [
    *(_deep(d, k) for d in (65, 100_000) for k in ("list", "grammar", "session", "stop")),
    b'{"inputs": "\xff\xfe"}',
    b'{"prompt": "\xc3\x28", "n": 2}',
    b'{"inputs": "x", "parameters": {"temperature": 1' + b"0" * 400 + b"}}",
    b'{"inputs": "x", "parameters": {"seed": ' + b"9" * 5000 + b"}}",
    b'{"inputs": "x", "parameters": {"top_p": 1e999}}',
    b'{"inputs": ["x"], "parameters": {"best_of": 1e400, "n": -1}}',
    b'{"messages": [], "n": ' + b"9" * 5000 + b"}",
    b'{"messages": [], "chat_template_kwargs": {"tokenize": true}}',
    b'{"prompt": ["a", "b"], "n": 64, "prompt_embeds": "AA=="}',
    b'{"inputs": ["a"',
    b"",
    b"null",
    b"\x00\xff",
]
bodies = st.one_of(
    json_values.map(_encode),
    tgi_bodies.map(_encode),
    openai_bodies.map(_encode),
    session_bodies.map(_encode),
    st.binary(max_size=40),
    st.sampled_from(HOSTILE),
)
headers = st.fixed_dictionaries(
    {},
    optional={
        "content-type": st.sampled_from(
            ["application/json", "text/plain", "application/vnd+json; charset=latin-1", "", "\u00e9/json"]
        ),
        "accept": st.sampled_from(["application/jsonlines", "text/event-stream", "*/*"]),
        "x-amzn-sagemaker-session-id": st.sampled_from(["NEW_SESSION", "nope", "", "a" * 300, "\u00e9"]),
        "x-amzn-sagemaker-custom-attributes": st.sampled_from(
            [
                "route=/v1/completions",
                "route=/v1/chat/completions",
                "route=/admin",
                "route=/v1/../sleep",
                "x=1",
            ]
        ),
    },
)
TARGETS = [(r.path, m) for r in routes.TABLE for m in (*(r.methods or ("POST", "GET")), "PUT")]
targets = st.sampled_from(TARGETS)


def _shape_ok(path: str, method: str, dialect: str, data: Any) -> bool:
    """The error body of `path` in the dialect it answers in."""
    one = isinstance(data.get("error"), dict) and {"message", "type", "code"} <= set(data["error"])
    tgi = isinstance(data.get("error"), str) and isinstance(data.get("error_type"), str)
    lmi = isinstance(data.get("error"), str) and isinstance(data.get("code"), int)
    if path in TGI_ROUTES and method == "POST":
        return tgi or one  # TGI's own errors; the gate's (429, 503) are the one shape
    if path == "/invocations" and dialect == "lmi":
        return lmi or one
    return one


async def _send(
    front: Front, dialect: str, target: tuple[str, str], body: bytes, head: dict[str, str]
) -> None:
    path, method = target
    raw_head = {k: v.encode("latin-1") for k, v in head.items()}  # header bytes as a client sends them
    r = await front.client.request(method, path, content=body if method != "GET" else None, headers=raw_head)
    assert r.status_code < 500, (method, path, body[:200], head, r.status_code, r.text[:300])
    if r.status_code >= 400 and method != "HEAD":
        data = r.json()
        assert isinstance(data, dict) and _shape_ok(path, method, dialect, data), (path, method, r.text[:300])


JSON = {"content-type": "application/json"}
SWEEP_HEADERS = ({}, JSON, {**JSON, "x-amzn-sagemaker-session-id": "NEW_SESSION"})


@pytest.mark.parametrize("dialect", ["tgi", "lmi"])
def test_no_hostile_request_makes_the_front_fail(dialect: str) -> None:
    loop = asyncio.new_event_loop()
    store = SessionStore(60.0, max_sessions=50)
    front_cm = running_front(dialect=dialect, sessions=store, max_concurrency=64)
    front = loop.run_until_complete(front_cm.__aenter__())
    try:
        # every known-hostile body on every route, method and header set
        for target in TARGETS:
            for body in HOSTILE:
                for head in SWEEP_HEADERS if target[1] == "POST" else ({},):
                    loop.run_until_complete(_send(front, dialect, target, body, head))

        @SETTINGS
        @given(target=targets, body=bodies, head=headers)
        def one(target: tuple[str, str], body: bytes, head: dict[str, str]) -> None:
            loop.run_until_complete(_send(front, dialect, target, body, head))

        one()
        assert front.gate.in_flight == 0  # every request gave its slots back
        assert loop.run_until_complete(front.client.get("/ping")).status_code == 200
    finally:
        loop.run_until_complete(front_cm.__aexit__(None, None, None))
        loop.close()


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("/generate", _deep(100_000, "grammar")),
        ("/generate", _deep(2_000, "stop")),
        ("/", b'{"inputs": "x", "parameters": {"temperature": 1' + b"0" * 400 + b"}}"),
        ("/generate", b'{"inputs": "x", "parameters": {"top_p": 1e999}}'),
    ],
)
def test_hostile_generate_parameters_are_422_in_tgi_shape(path: str, raw: bytes) -> None:
    """Regression: a grammar value nested 100k deep was a 500 (RecursionError), a 400-digit
    temperature too (OverflowError in math.isfinite)."""

    async def go() -> None:
        async with running_front() as front:
            r = await front.client.post(path, content=raw, headers={"content-type": "application/json"})
            assert r.status_code in (400, 422), r.text
            assert isinstance(r.json()["error"], str) and front.seen == []

    asyncio.run(go())
