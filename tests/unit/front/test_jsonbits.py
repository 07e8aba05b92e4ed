"""front/jsonbits.py writes every JSON value as json.dumps(..., ensure_ascii=False) does, and the TGI and
LMI stream events built from it (tgi.stream_bytes, lmi.stream_bytes) are byte for byte the events the
dialects' dicts encode to (tgi.encode_event), over random values and events."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronserve.front import jsonbits, lmi, tgi
from neuronserve.front.completion_reader import Event, Tok
from neuronserve.front.genparams import GenRequest

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x40)),  # controls, quotes, slashes
    st.text(alphabet=st.characters(categories=["Cs", "Zl", "Zp", "Cc", "So"])),  # surrogates, separators
)
values = st.recursive(scalars, lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids), max_leaves=8)


@settings(max_examples=500)
@given(values)
def test_a_value_is_written_as_json_dumps_writes_it(value: Any) -> None:
    assert jsonbits.value(value) == json.dumps(value, ensure_ascii=False)


def test_the_edges_of_numbers() -> None:
    for v in (0.0, -0.0, 1e16, 1e-7, 5e-324, math.inf, -math.inf, math.nan, 2**64, -(2**64), True, False):
        assert jsonbits.value(v) == json.dumps(v, ensure_ascii=False)


toks = st.builds(
    Tok,
    id=st.one_of(st.integers(), st.integers(min_value=-1, max_value=200_000)),
    text=st.text(),
    logprob=st.one_of(st.none(), st.floats(), st.integers(min_value=-5, max_value=0)),
    special=st.booleans(),
)
finals = st.one_of(
    st.none(),
    st.tuples(st.sampled_from(["length", "eos_token", "stop_sequence"]), st.integers(0, 9), st.text()),
)
events = st.builds(Event, token=toks, top=st.lists(toks, max_size=3), final=finals)
requests = st.builds(
    GenRequest,
    prompt=st.text(max_size=20),
    stream=st.just(True),
    details=st.booleans(),
    full_text=st.booleans(),
    top_n=st.sampled_from([0, 0, 2]),
    seed=st.one_of(st.none(), st.integers(0, 2**32)),
    n=st.just(1),
    decoder_details=st.booleans(),
)


def _same(fast: bytes | Exception, slow: bytes | Exception) -> None:
    if isinstance(slow, Exception):  # a lone surrogate cannot be UTF-8: both refuse it the same way
        assert type(fast) is type(slow)
    else:
        assert fast == slow


def _run(f: Any, *args: Any) -> bytes | Exception:
    try:
        out: bytes = f(*args)
    except UnicodeEncodeError as err:
        return err
    return out


@settings(max_examples=400)
@given(requests, events, st.booleans())
def test_tgi_stream_bytes_are_the_events_json(req: GenRequest, event: Event, jsonlines: bool) -> None:
    fast = _run(tgi.stream_bytes, req, event, jsonlines)
    slow = _run(lambda: tgi.encode_event(tgi.stream_event(req, event), jsonlines))
    _same(fast, slow)


@settings(max_examples=400)
@given(requests, events, st.booleans())
def test_lmi_stream_bytes_are_the_events_json(req: GenRequest, event: Event, jsonlines: bool) -> None:
    fast = _run(lmi.stream_bytes, req, event, jsonlines)
    slow = _run(lambda: tgi.encode_event(lmi.stream_event(req, event), jsonlines))
    _same(fast, slow)


def test_the_encoder_is_json_dumps_without_ascii_escapes() -> None:
    event = {"token": {"id": 1, "text": "é\n\u2028", "logprob": None, "special": False}, "x": [1.5, "ü"]}
    assert tgi.encode_event(event, True) == (json.dumps(event, ensure_ascii=False) + "\n").encode()
    assert tgi.encode_event(event, False) == f"data:{json.dumps(event, ensure_ascii=False)}\n\n".encode()


@settings(max_examples=300)
@given(values)
def test_a_json_answer_is_starlettes_json_response(value: Any) -> None:
    from starlette.responses import JSONResponse

    try:
        reference = JSONResponse(value)
    except (ValueError, UnicodeEncodeError) as err:  # NaN refused, lone surrogates: refused alike
        with pytest.raises(type(err)):
            jsonbits.JsonAnswer(value)
        return
    ours = jsonbits.JsonAnswer(value)
    assert (ours.body, ours.raw_headers, ours.status_code) == (reference.body, reference.raw_headers, 200)
