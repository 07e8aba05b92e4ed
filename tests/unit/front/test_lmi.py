"""LMI's rolling-batch shapes and best_of ordering, from recorded-style engine answers (pure)."""

from __future__ import annotations

import json
from typing import Any

from neuronserve.front import completion_reader, genparams, lmi, tgi


def _req(params: dict[str, Any], stream: bool = False) -> genparams.GenRequest:
    return genparams.translate({"inputs": "hi", "parameters": params, "stream": stream}, "hi", "m")


def _choice(
    text: str, tokens: list[str], logprobs: list[float], ids: list[int], **extra: Any
) -> dict[str, Any]:
    return {
        "text": text,
        "finish_reason": "length",
        "logprobs": {"tokens": tokens, "token_logprobs": logprobs, "text_offset": None, "top_logprobs": None},
        "token_ids": ids,
        **extra,
    }


def test_lmi_object_with_details_and_prefill() -> None:
    req = _req({"details": True, "decoder_input_details": True})
    choice = _choice(
        " a b",
        [" a", " b"],
        [-0.5, -0.25],
        [5, 6],
        prompt_token_ids=[1, 9],
        prompt_logprobs=[None, {"9": {"logprob": -3.0, "rank": 4, "decoded_token": "hi"}}],
    )
    body = lmi.response(req, completion_reader.sequences(req, {"choices": [choice]}, {1: "<s>"}))
    assert body == {
        "generated_text": " a b",
        "details": {
            "finish_reason": "length",
            "generated_tokens": 2,
            "inputs": "hi",
            "tokens": [{"id": 5, "text": " a", "log_prob": -0.5}, {"id": 6, "text": " b", "log_prob": -0.25}],
            "prefill": [
                {"id": 1, "text": "<s>", "log_prob": None},
                {"id": 9, "text": "hi", "log_prob": -3.0},
            ],
        },
    }


def test_best_of_answers_the_most_likely_sequence() -> None:
    req = _req({"best_of": 2, "do_sample": True, "details": True})
    worse = _choice(" x", [" x"], [-4.0], [7])
    better = _choice(" y", [" y"], [-0.1], [8])
    seqs = completion_reader.sequences(req, {"choices": [worse, better]}, {})
    out = tgi.response(req, seqs)
    assert out["generated_text"] == " y"
    assert [s["generated_text"] for s in out["details"]["best_of_sequences"]] == [" x"]
    assert lmi.response(req, seqs)["details"]["best_of_sequences"][0]["generated_text"] == " x"


def test_top_tokens_by_id_use_the_resolved_texts() -> None:
    req = _req({"top_n_tokens": 2, "details": True})
    choice = {
        "text": " a",
        "finish_reason": "length",
        "token_ids": [5],
        "logprobs": {
            "tokens": ["token_id:5"],
            "token_logprobs": [-0.5],
            "text_offset": [0],
            "top_logprobs": [{"token_id:5": -0.5, "token_id:6": -1.5}],
        },
    }
    assert completion_reader.ids_to_resolve(choice) == {5, 6}
    out = tgi.response(req, completion_reader.sequences(req, {"choices": [choice]}, {5: " a", 6: " b"}))
    assert out["details"]["tokens"] == [{"id": 5, "text": " a", "logprob": -0.5, "special": False}]
    assert out["details"]["top_tokens"] == [
        [
            {"id": 5, "text": " a", "logprob": -0.5, "special": False},
            {"id": 6, "text": " b", "logprob": -1.5, "special": False},
        ]
    ]


def test_lmi_stream_lines() -> None:
    req = _req({"details": True}, stream=True)
    reader = completion_reader.StreamReader(req)
    lines = []
    for piece, reason in ((" a", None), (" b", "length")):
        choice, _ = reader.pending(json.dumps({"choices": [{"text": piece, "finish_reason": reason}]}))
        assert choice is not None
        lines += [lmi.stream_event(req, e) for e in reader.events(choice, {})]
    assert lines[0] == {"token": {"id": -1, "text": " a", "log_prob": None}}
    assert lines[-1]["generated_text"] == " a b"
    assert lines[-1]["details"] == {"finish_reason": "length", "generated_tokens": 2, "inputs": "hi"}
    assert lmi.stream_error_event()["details"]["finish_reason"] == "error"


def test_lmi_stream_error_event() -> None:
    assert lmi.stream_error_event() == {
        "token": {"id": -1, "text": "", "log_prob": -1, "special_token": True},
        "generated_text": "",
        "details": {"finish_reason": "error", "generated_tokens": None, "inputs": None},
    }
