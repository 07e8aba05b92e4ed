"""The engine's completion JSON read into dialect-neutral sequences and token events
(front/completion_reader.py): token ids and texts, prefill, top tokens, finish reasons, the most likely
sequence first, and the stream reader. The TGI and LMI answers built from them, whole shapes written
out, are test_completion_reader_shapes.py. Added where mutation testing showed the reading unchecked by
unit tests (docs/TESTING.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronserve.front import completion_reader, genparams, tgi
from neuronserve.front.completion_reader import Event, Tok


def _req(stream: bool = False, **params: Any) -> genparams.GenRequest:
    return genparams.translate({"inputs": "Hi", "parameters": params, "stream": stream}, "Hi", "m")


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("token_id:12", (12, "twelve")),
        ("token_id:13", (13, "")),  # an id whose text was not fetched
        ("token_id:", (None, "token_id:")),
        ("token_id:-1", (None, "token_id:-1")),
        ("token_id:1a", (None, "token_id:1a")),
        ("xtoken_id:12", (None, "xtoken_id:12")),
        ("hello", (None, "hello")),
    ],
)
def test_token_id(raw: str, want: tuple[int | None, str]) -> None:
    assert completion_reader.token_id(raw, {12: "twelve"}) == want


def test_ids_to_resolve_collects_generated_top_and_first_prompt_ids() -> None:
    choice = {
        "logprobs": {
            "tokens": ["token_id:5", "token_id:6"],
            "top_logprobs": [{"token_id:5": -0.1, "token_id:9": -2.0}, None, {"plain": -1.0}],
        },
        "prompt_token_ids": [1, 2],
        "prompt_logprobs": [None, {"2": {"logprob": -1.0}}],
    }
    assert completion_reader.ids_to_resolve(choice) == {5, 6, 9, 1}
    assert completion_reader.ids_to_resolve({**choice, "prompt_logprobs": None}) == {5, 6, 9}
    assert (
        completion_reader.ids_to_resolve({"logprobs": {"tokens": ["a"]}, "prompt_logprobs": [None]}) == set()
    )
    assert completion_reader.ids_to_resolve({}) == set()


@pytest.mark.parametrize(
    ("reason", "stop", "stop_reason", "want"),
    [
        ("stop", ["###"], "###", "stop_sequence"),
        ("stop", ["###"], None, "eos_token"),
        ("stop", ["###"], 2, "eos_token"),  # a stop token id, not one of the client's strings
        ("stop", [], "###", "eos_token"),
        ("length", ["###"], "###", "length"),
        ("abort", [], None, "length"),
        (None, [], None, "length"),
        ("something-new", [], None, "length"),
    ],
)
def test_finish_reason(reason: str | None, stop: list[str], stop_reason: Any, want: str) -> None:
    assert completion_reader.finish_reason(reason, stop, stop_reason) == want


def test_prefill_reads_prompt_logprobs() -> None:
    choice = {
        "prompt_token_ids": [1, 15, 16],
        "prompt_logprobs": [
            None,
            {"15": {"logprob": -3.5, "rank": 4, "decoded_token": "Hi"}, "7": {"logprob": -0.1, "rank": 1}},
            {"16": {"logprob": -0.25, "rank": 1, "decoded_token": None}},
        ],
    }
    assert completion_reader.prefill(choice, {1: "<s>"}) == [
        Tok(1, "<s>", None),
        Tok(15, "Hi", -3.5),
        Tok(16, "", -0.25),
    ]
    # no prompt ids: the first entry stands for the token
    assert completion_reader.prefill(
        {"prompt_logprobs": [None, {"4": {"logprob": -1.0, "decoded_token": "a"}}]}, {}
    ) == [Tok(4, "a", -1.0)]
    assert completion_reader.prefill({"prompt_logprobs": None}, {}) == []


def test_top_tokens_by_id_and_by_text() -> None:
    choice = {"logprobs": {"top_logprobs": [{"token_id:3": -0.5, "token_id:4": -1.5}, None, {"x": -0.1}]}}
    assert completion_reader.top_tokens(choice, {3: "a", 4: "b"}) == [
        [Tok(3, "a", -0.5), Tok(4, "b", -1.5)],
        [],
        [Tok(-1, "x", -0.1)],
    ]


def test_tokens_take_ids_from_the_choice_when_texts_are_strings() -> None:
    choice = {"logprobs": {"tokens": ["a", "b", "c"], "token_logprobs": [-1.0, None]}, "token_ids": [7, 8]}
    assert completion_reader.tokens(choice, "abc", {}) == [
        Tok(7, "a", -1.0),
        Tok(8, "b", None),
        Tok(-1, "c", None),
    ]
    by_id = {"logprobs": {"tokens": ["token_id:7", "token_id:8"], "text_offset": [0, 2]}}
    assert completion_reader.tokens(by_id, "ab", {7: "a", 8: "b"}) == [Tok(7, "a", None), Tok(8, "b", None)]
    # ids' texts that do not join to the text: the offsets (of "token_id:N" strings) are not used
    assert completion_reader.tokens(by_id, "aXb", {7: "a", 8: "b"}) == [Tok(7, "", None), Tok(8, "aXb", None)]


def _choice(text: str, logprobs: list[float], ids: list[int], finish: str = "length") -> dict[str, Any]:
    return {
        "text": text,
        "finish_reason": finish,
        "token_ids": ids,
        "logprobs": {"tokens": list(text), "token_logprobs": logprobs},
    }


def test_sequences_most_likely_first_and_counts() -> None:
    req = _req(best_of=2, do_sample=True, details=True)
    resp = {
        "choices": [_choice("ab", [-2.0, -1.0], [1, 2]), _choice("cd", [-0.5, -0.25], [3, 4], "stop")],
        "usage": {"completion_tokens": 4},
    }
    seqs = completion_reader.sequences(req, resp, {})
    assert [(s.text, s.score, s.generated, s.finish_reason) for s in seqs] == [
        ("cd", -0.75, 2, "eos_token"),
        ("ab", -3.0, 2, "length"),
    ]
    # one sequence: the engine's usage counts the generated tokens
    one = completion_reader.sequences(
        _req(), {"choices": [_choice("ab", [-1.0, -1.0], [1, 2])], "usage": {"completion_tokens": 5}}, {}
    )
    assert one[0].generated == 5
    none = completion_reader.sequences(_req(), {"choices": [{"text": "ab", "token_ids": [1, 2]}]}, {})
    assert (none[0].generated, none[0].tokens, none[0].top) == (2, [], [])
    empty = completion_reader.sequences(_req(), {}, {})
    assert (empty[0].text, empty[0].finish_reason, empty[0].generated) == ("", "length", 0)


def test_stream_reader_counts_tokens_and_skips_empty_chunks() -> None:
    reader = completion_reader.StreamReader(_req(stream=True, details=True))
    assert reader.pending("[DONE]") == (None, set())
    assert reader.pending(" [DONE] ") == (None, set())
    assert reader.pending("[1]") == (None, set())
    assert reader.pending('{"choices": [], "usage": {"completion_tokens": 2}}') == (None, set())
    assert reader.usage == {"completion_tokens": 2}
    choice, ids = reader.pending(
        '{"choices": [{"text": "a", "logprobs": {"tokens": ["token_id:5"]}}], "usage": null}'
    )
    assert choice is not None and ids == {5}
    assert reader.usage == {"completion_tokens": 2}
    assert reader.events({"text": "", "finish_reason": None}, {}) == []
    first = reader.events({"text": "a", "token_ids": [5], "finish_reason": None}, {})
    assert [(e.token, e.final) for e in first] == [(Tok(5, "a", None), None)]
    last = reader.events({"text": "", "token_ids": [2], "finish_reason": "stop"}, {})
    assert [(e.token, e.final) for e in last] == [(Tok(2, "", None, special=True), ("eos_token", 1, "a"))]
    # a final chunk with text, no logprobs and no ids is one token, its id unknown
    reader = completion_reader.StreamReader(_req(stream=True))
    last = reader.events({"text": "bc", "finish_reason": "length"}, {})
    assert [(e.token, e.final) for e in last] == [(Tok(-1, "bc", None), ("length", 1, "bc"))]


def test_a_chunk_of_several_tokens_is_one_event_per_token() -> None:
    """vLLM merges a request's deltas when its output loop falls behind: a chunk with two ids is two
    tokens, their texts fetched (pending names them) and aligned to the chunk's text, both counted."""
    reader = completion_reader.StreamReader(_req(stream=True, details=True))
    merged = '{"choices": [{"text": " is the", "token_ids": [12, 13], "logprobs": null}]}'
    choice, ids = reader.pending(merged)
    assert choice is not None and ids == {12, 13}
    assert reader.pending('{"choices": [{"text": " Paris", "token_ids": [11]}]}')[1] == set()
    events = reader.events(choice, {12: "is", 13: "the"})
    assert [(e.token, e.final) for e in events] == [
        (Tok(12, " is", None), None),
        (Tok(13, " the", None), None),
    ]
    last = reader.events({"text": "", "token_ids": [14, 2], "finish_reason": "stop"}, {14: "", 2: ""})
    # the end: an empty last token is the end-of-sequence token, as an empty final chunk is
    assert [(e.token, e.final) for e in last] == [
        (Tok(14, "", None), None),
        (Tok(2, "", None, special=True), ("eos_token", 3, " is the")),
    ]
    # texts the engine could not give: the chunk's text goes to its last token, nothing is lost
    reader = completion_reader.StreamReader(_req(stream=True))
    lone = reader.events({"text": "bc", "token_ids": [7, 8], "finish_reason": "length"}, {})
    assert [(e.token, e.final) for e in lone] == [
        (Tok(7, "", None), None),
        (Tok(8, "bc", None), ("length", 2, "bc")),
    ]


def test_prefill_takes_the_prompt_token_not_the_most_likely_one() -> None:
    """vLLM lists the most likely alternative first when the prompt token was not the top one."""
    choice = {
        "prompt_token_ids": [1, 15],
        "prompt_logprobs": [None, {"7": {"logprob": -0.1, "decoded_token": "x"}, "15": {"logprob": -3.5}}],
    }
    assert completion_reader.prefill(choice, {}) == [Tok(1, "", None), Tok(15, "", -3.5)]
    # more entries than prompt ids: the first entry stands for the token
    choice = {
        "prompt_token_ids": [1],
        "prompt_logprobs": [None, {"9": {"logprob": -2.0, "decoded_token": "y"}}],
    }
    assert completion_reader.prefill(choice, {}) == [Tok(1, "", None), Tok(9, "y", -2.0)]
    # an id that is not among the entries: the first entry
    choice = {"prompt_token_ids": [1, 15], "prompt_logprobs": [None, {"7": {"logprob": -0.1}}]}
    assert completion_reader.prefill(choice, {}) == [Tok(1, "", None), Tok(7, "", -0.1)]


def test_top_tokens_only_when_asked_for() -> None:
    choice = {**_choice("a", [-0.5], [5]), "logprobs": {"tokens": ["a"], "top_logprobs": [{"a": -0.5}]}}
    assert completion_reader.sequences(_req(details=True), {"choices": [choice]}, {})[0].top == []
    assert completion_reader.sequences(_req(top_n_tokens=1), {"choices": [choice]}, {})[0].top == [
        [Tok(-1, "a", -0.5)]
    ]


def test_stream_reader_top_tokens_ids_and_stop_sequences() -> None:
    reader = completion_reader.StreamReader(_req(stream=True, top_n_tokens=2, stop=["##"]))
    assert reader.usage == {}
    chunk = {
        "text": "a",
        "finish_reason": None,
        "logprobs": {
            "tokens": ["token_id:5"],
            "token_logprobs": [-0.5],
            "top_logprobs": [{"token_id:5": -0.5, "token_id:6": -1.5}],
        },
    }
    (event,) = reader.events(chunk, {5: "a", 6: "b"})
    assert event == Event(Tok(5, "a", -0.5), [Tok(5, "a", -0.5), Tok(6, "b", -1.5)])
    (last,) = reader.events({"text": "", "finish_reason": "stop", "stop_reason": "##"}, {})
    assert last.final == ("stop_sequence", 1, "a")
    assert last.top == []
    # without top_n the engine's top_logprobs are not turned into top tokens
    reader = completion_reader.StreamReader(_req(stream=True, details=True))
    (event,) = reader.events(chunk, {5: "a", 6: "b"})
    assert event == Event(Tok(5, "a", -0.5), [])
    (last,) = reader.events({"text": "", "finish_reason": "stop", "stop_reason": "##"}, {})
    assert last.final == ("eos_token", 1, "a")


@pytest.mark.parametrize(
    ("parts", "text", "want"),
    [
        (["Paris", "is"], " Paris is", [" Paris", " is"]),  # SentencePiece: ids decode without the space
        ([" Paris", " is"], " Paris is", [" Paris", " is"]),  # byte-level BPE: already joins
        (["a", "", "b"], "a\u00e9b", ["a", "", "\u00e9b"]),  # a partial byte: the character comes later
        (["x", "y"], "ab", ["", "ab"]),  # unmatched: everything to the last token (token_texts)
        (["Paris", "is"], " Paris is.", [" Paris", " is."]),
        ([], "", []),
    ],
)
def test_aligned_texts_join_to_the_text(parts: list[str], text: str, want: list[str]) -> None:
    out = completion_reader.aligned_texts(parts, text)
    assert out == want and "".join(out) == text


def test_details_without_engine_logprobs_are_served_from_token_ids() -> None:
    """vllm-neuron's on-device sampling: no logprobs, token ids only -> tokens with logprob None."""
    req = _req(details=True)
    req.engine.pop("logprobs")  # what the generate flow does where logprobs are not served
    choice = {"text": " Paris is", "token_ids": [5, 6], "logprobs": None, "finish_reason": "length"}
    assert completion_reader.ids_to_resolve(choice, generated=True) == {5, 6}
    assert completion_reader.ids_to_resolve(choice) == set()
    seqs = completion_reader.sequences(req, {"choices": [choice]}, {5: "Paris", 6: "is"})
    details = tgi.response(req, seqs)["details"]
    assert details["tokens"] == [
        {"id": 5, "text": " Paris", "logprob": None, "special": False},
        {"id": 6, "text": " is", "logprob": None, "special": False},
    ]
    # without details, nothing is built from the ids
    assert completion_reader.sequences(_req(), {"choices": [choice]}, {})[0].tokens == []


_chunks = st.lists(
    st.fixed_dictionaries(
        {"text": st.one_of(st.text(max_size=5), st.just(""), st.none())},
        optional={
            "token_ids": st.one_of(st.none(), st.lists(st.integers(0, 99), max_size=3)),
            "finish_reason": st.one_of(st.none(), st.sampled_from(["length", "stop", "abort"])),
            "stop_reason": st.one_of(st.none(), st.just("###"), st.integers(0, 5)),
            "logprobs": st.none(),
        },
    ),
    max_size=6,
)


@settings(max_examples=300)
@given(_chunks, st.booleans())
def test_a_chunk_without_logprobs_makes_the_events_of_the_general_path(chunks: list[Any], top: bool) -> None:
    """StreamReader's fast path for chunks without logprobs (one token each) gives the events, counts
    and final text the general per-token path gives, chunk after chunk."""
    req = genparams.translate({"inputs": "hi", "parameters": {"stop": ["###"]}, "stream": True}, "hi", "m")
    req.top_n = 2 if top else 0
    fast, general = completion_reader.StreamReader(req), completion_reader.StreamReader(req)
    for choice in chunks:
        piece, reason = choice.get("text") or "", choice.get("finish_reason")
        assert fast.events(choice, {}) == general._general(choice, piece, reason, {})
        assert (fast.count, fast.text) == (general.count, general.text)
