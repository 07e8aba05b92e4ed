"""Engine completion JSON -> TGI and LMI answers, whole shapes written out (no engine).

The engine side of each case is what vLLM's /v1/completions returns (choices with logprobs,
token_ids, prompt_logprobs as lists of {id: {logprob, rank, decoded_token}}); the client side is
the documented TGI GenerateResponse / StreamResponse and LMI rolling-batch schema, read through
front/completion_reader.py. Added where mutation testing showed the shaping unchecked by unit tests
(docs/TESTING.md).
"""

from __future__ import annotations

import pytest
from tests.unit.front.test_completion_reader import _choice, _req

from neuronserve.front import completion_reader, lmi, tgi
from neuronserve.front.completion_reader import Event, Tok


def test_tgi_best_of_answer_shape() -> None:
    req = _req(best_of=2, do_sample=True, details=True, seed=3, return_full_text=True)
    resp = {"choices": [_choice("ab", [-2.0, -1.0], [1, 2]), _choice("cd", [-0.5, -0.25], [3, 4], "stop")]}
    got = tgi.response(req, completion_reader.sequences(req, resp, {}))
    tokens_cd = [
        {"id": 3, "text": "c", "logprob": -0.5, "special": False},
        {"id": 4, "text": "d", "logprob": -0.25, "special": False},
    ]
    tokens_ab = [
        {"id": 1, "text": "a", "logprob": -2.0, "special": False},
        {"id": 2, "text": "b", "logprob": -1.0, "special": False},
    ]
    assert got == {
        "generated_text": "Hicd",
        "details": {
            "finish_reason": "eos_token",
            "generated_tokens": 2,
            "seed": 3,
            "prefill": [],
            "tokens": tokens_cd,
            "best_of_sequences": [
                {
                    "generated_text": "Hiab",
                    "finish_reason": "length",
                    "generated_tokens": 2,
                    "seed": 3,
                    "prefill": [],
                    "tokens": tokens_ab,
                }
            ],
        },
    }


def test_tgi_details_with_top_tokens_and_prefill() -> None:
    req = _req(details=True, top_n_tokens=1, decoder_input_details=True)
    resp = {
        "choices": [
            {
                "text": "a",
                "finish_reason": "length",
                "token_ids": [5],
                "logprobs": {
                    "tokens": ["token_id:5"],
                    "token_logprobs": [-0.5],
                    "top_logprobs": [{"token_id:5": -0.5}],
                },
                "prompt_token_ids": [1],
                "prompt_logprobs": [None],
            }
        ]
    }
    got = tgi.response(req, completion_reader.sequences(req, resp, {5: "a", 1: "<s>"}))
    tok = {"id": 5, "text": "a", "logprob": -0.5, "special": False}
    assert got == {
        "generated_text": "a",
        "details": {
            "finish_reason": "length",
            "generated_tokens": 1,
            "seed": None,
            "prefill": [{"id": 1, "text": "<s>", "logprob": None}],
            "tokens": [tok],
            "top_tokens": [[tok]],
        },
    }


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (422, "validation"),
        (424, "generation"),
        (429, "overloaded"),
        (503, "unhealthy"),
        (400, "generation"),
        (499, "generation"),
        (500, "error"),
        (502, "error"),
    ],
)
def test_tgi_error_types(status: int, error_type: str) -> None:
    assert tgi.error_body(status, "why") == {"error": "why", "error_type": error_type}


def test_tgi_stream_events_with_top_tokens() -> None:
    req = _req(stream=True, top_n_tokens=2, details=True, seed=4)
    tok, alt = Tok(5, "a", -0.5), Tok(6, "b", -1.5)
    mid = tgi.stream_event(req, Event(tok, [tok, alt]))
    assert mid == {
        "token": {"id": 5, "text": "a", "logprob": -0.5, "special": False},
        "generated_text": None,
        "details": None,
        "top_tokens": [
            {"id": 5, "text": "a", "logprob": -0.5, "special": False},
            {"id": 6, "text": "b", "logprob": -1.5, "special": False},
        ],
    }
    last = tgi.stream_event(req, Event(tok, [], ("stop_sequence", 7, "all")))
    assert last["generated_text"] == "all"
    assert last["details"] == {"finish_reason": "stop_sequence", "generated_tokens": 7, "seed": 4}
    plain = tgi.stream_event(_req(stream=True), Event(tok, [], ("length", 1, "a")))
    assert plain == {
        "token": {"id": 5, "text": "a", "logprob": -0.5, "special": False},
        "generated_text": "a",
        "details": None,
    }


def test_lmi_answer_shapes() -> None:
    req = _req(details=True, decoder_input_details=True, top_n_tokens=1)
    seq = completion_reader.Seq(
        text="a",
        finish_reason="length",
        tokens=[Tok(5, "a", -0.5)],
        top=[[Tok(5, "a", -0.5)]],
        prefill=[Tok(1, "<s>", None)],
        generated=1,
    )
    assert lmi.response(req, [seq]) == {
        "generated_text": "a",
        "details": {
            "finish_reason": "length",
            "generated_tokens": 1,
            "inputs": "Hi",
            "tokens": [{"id": 5, "text": "a", "log_prob": -0.5}],
            "prefill": [{"id": 1, "text": "<s>", "log_prob": None}],
            "top_tokens": [[{"id": 5, "text": "a", "log_prob": -0.5}]],
        },
    }
    assert lmi.response(_req(), [seq]) == {"generated_text": "a"}
    # best_of: details appear even when not asked for, to carry the other sequences
    other = completion_reader.Seq(
        text="b", finish_reason="eos_token", tokens=[Tok(6, "b", -2.0)], top=[], prefill=[], generated=1
    )
    assert lmi.response(_req(return_full_text=True, best_of=2, do_sample=True), [seq, other]) == {
        "generated_text": "Hia",
        "details": {
            "finish_reason": "length",
            "generated_tokens": 1,
            "inputs": "Hi",
            "tokens": [{"id": 5, "text": "a", "log_prob": -0.5}],
            "best_of_sequences": [
                {
                    "finish_reason": "eos_token",
                    "generated_tokens": 1,
                    "tokens": [{"id": 6, "text": "b", "log_prob": -2.0}],
                    "generated_text": "Hib",
                }
            ],
        },
    }


def test_lmi_stream_and_error_shapes() -> None:
    tok = Tok(5, "a", -0.5)
    assert lmi.stream_event(_req(stream=True), Event(tok, [])) == {
        "token": {"id": 5, "text": "a", "log_prob": -0.5}
    }
    assert lmi.stream_event(_req(stream=True, details=True), Event(tok, [], ("eos_token", 3, "abc"))) == {
        "token": {"id": 5, "text": "a", "log_prob": -0.5},
        "generated_text": "abc",
        "details": {"finish_reason": "eos_token", "generated_tokens": 3, "inputs": "Hi"},
    }
    assert lmi.stream_event(_req(stream=True), Event(tok, [], ("eos_token", 3, "abc"))) == {
        "token": {"id": 5, "text": "a", "log_prob": -0.5},
        "generated_text": "abc",
    }
    assert lmi.error_body(424, "boom") == {"error": "boom", "code": 424}


def test_tgi_events_are_utf8_not_ascii_escapes() -> None:
    event = {"token": {"text": "\u2713"}}
    assert tgi.encode_event(event, jsonlines=True) == '{"token": {"text": "\u2713"}}\n'.encode()
    assert tgi.encode_event(event, jsonlines=False) == 'data:{"token": {"text": "\u2713"}}\n\n'.encode()
