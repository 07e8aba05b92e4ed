"""A passed-through stream's usage (front/streamusage.py): asked of the engine when the client did not ask,
taken out of the client's stream with the terminal chunks given back their fingerprint, and read from the
stream's end otherwise. The streams are shaped as vLLM 0.32.0 writes them (one `data: ...\\n\\n` per
event, compact JSON), cut at every byte to stand for any TCP chunking."""

from __future__ import annotations

import json
from typing import Any

import pytest

from neuronserve.front.streamusage import TAIL_BYTES, Tap, ask, counts, prepare

FP = "vllm-0.32.0-69620550"


def _event(doc: Any) -> bytes:
    return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"


def _chunk(content: str, finish: str | None = None, fp: str | None = None, index: int = 0) -> dict[str, Any]:
    choice = {"index": index, "delta": {"content": content}, "logprobs": None, "finish_reason": finish}
    doc: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice]}
    if fp:
        doc["system_fingerprint"] = fp
    return doc


USAGE = {"prompt_tokens": 37, "total_tokens": 40, "completion_tokens": 3}
DONE = b"data: [DONE]\n\n"
# What the engine sends without the question (the client's view), and with it (what the front gets).
PLAIN = [_chunk("Hello"), _chunk(" there"), _chunk(",", "length", FP)]
ASKED = [_chunk("Hello"), _chunk(" there"), _chunk(",", "length")]
USAGE_EVENT = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": USAGE}
WITH_USAGE = b"".join(_event(d) for d in ASKED) + _event({**USAGE_EVENT, "system_fingerprint": FP}) + DONE


def _through(tap: Tap, parts: list[bytes]) -> bytes:
    return b"".join(tap.feed(p) for p in parts) + tap.close()


def _events(raw: bytes) -> list[Any]:
    return [json.loads(e.removeprefix(b"data: ")) for e in raw.split(b"\n\n") if e and e != b"data: [DONE]"]


@pytest.mark.parametrize("cut", range(0, len(WITH_USAGE), 7))
def test_the_asked_usage_is_taken_out_and_the_fingerprint_given_back(cut: int) -> None:
    tap = Tap(strip=True)
    out = _through(tap, [WITH_USAGE[:cut], WITH_USAGE[cut:]])
    assert _events(out) == PLAIN  # what the client would have had without the question
    assert out.endswith(DONE)
    assert tap.usage() == USAGE


def test_token_chunks_pass_at_once_and_only_terminal_ones_wait() -> None:
    tap = Tap(strip=True)
    first = _event(ASKED[0])
    assert tap.feed(first) == first  # no delay for a token
    assert tap.feed(_event(ASKED[2])) == b""  # the terminal chunk waits for the usage event
    assert _events(tap.feed(_event({**USAGE_EVENT, "system_fingerprint": FP}))) == [PLAIN[2]]


def test_n_choices_each_keep_their_terminal_chunk() -> None:
    """A choice that ends before another goes on is passed on with the next token (never delayed to
    the stream's end): only the chunks the usage event follows get the fingerprint back."""
    asked = [_chunk("a", index=0), _chunk("b", "stop", index=1), _chunk("c", index=0), _chunk("d", "stop")]
    raw = b"".join(_event(d) for d in asked) + _event({**USAGE_EVENT, "system_fingerprint": FP}) + DONE
    tap = Tap(strip=True)
    out = _events(_through(tap, [raw]))
    assert [c["choices"][0]["delta"]["content"] for c in out] == ["a", "b", "c", "d"]
    assert [c.get("system_fingerprint") for c in out] == [None, None, None, FP]


def test_a_stream_cut_short_loses_nothing_it_held() -> None:
    """The engine went away after a terminal chunk and half an event: the client still gets them."""
    raw = _event(ASKED[0]) + _event(ASKED[2]) + b'data: {"id":'
    tap = Tap(strip=True)
    assert _through(tap, [raw]) == raw
    assert tap.usage() == {}


def test_an_engine_older_than_fingerprints_is_passed_as_it_came() -> None:
    """vLLM 0.11.0 (lane 2.27) writes no system_fingerprint: nothing is re-encoded."""
    raw = b"".join(_event(d) for d in ASKED) + _event(USAGE_EVENT) + DONE
    tap = Tap(strip=True)
    assert _through(tap, [raw]) == b"".join(_event(d) for d in ASKED) + DONE
    assert tap.usage() == USAGE


def test_a_client_that_asked_gets_the_stream_untouched_and_the_usage_is_read_from_its_end() -> None:
    tap = Tap()
    assert _through(tap, [WITH_USAGE[:50], WITH_USAGE[50:]]) == WITH_USAGE
    assert counts(tap.usage()) == (37, 3)


def test_a_responses_stream_is_read_from_its_completed_event() -> None:
    created = {"type": "response.created", "response": {"id": "r", "usage": None}}
    usage = {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5}
    completed = {
        "type": "response.completed",
        "response": {"output": [{"text": "x" * 40000}], "usage": usage},
    }
    raw = b"event: response.created\n" + _event(created) + b"event: response.completed\n" + _event(completed)
    tap = Tap()
    assert _through(tap, [raw[i : i + 1000] for i in range(0, len(raw), 1000)]) == raw
    assert counts(tap.usage()) == (12, 5)


@pytest.mark.parametrize("size", [1, 7, 4096, TAIL_BYTES, TAIL_BYTES + 1, 3 * TAIL_BYTES])
def test_the_usage_is_read_from_the_last_tail_bytes_however_the_stream_is_cut(size: int) -> None:
    """The end is kept chunk by chunk: a usage in the stream's last TAIL_BYTES is read whatever the
    chunks' sizes; one that only an earlier part of the stream held is not (the end is all it keeps)."""
    early = _event({"usage": {"prompt_tokens": 1, "completion_tokens": 2}})
    filler = b"".join(_event(_chunk("x" * 50)) for _ in range(2 * TAIL_BYTES // 100))
    for raw, expected in ((filler + WITH_USAGE, (37, 3)), (early + filler + b"x" * TAIL_BYTES, (None, None))):
        tap = Tap()
        assert _through(tap, [raw[i : i + size] for i in range(0, len(raw), size)]) == raw
        assert counts(tap.usage()) == expected


def test_a_stream_without_usage_counts_nothing() -> None:
    tap = Tap()
    _through(tap, [b"".join(_event(d) for d in PLAIN) + DONE])
    assert tap.usage() == {} and counts({}) == (None, None)


CHAT = "/v1/chat/completions"
USAGE_ON = {"include_usage": True}
CONTINUOUS = {"continuous_usage_stats": True}


@pytest.mark.parametrize(
    ("path", "body", "asked", "options"),
    [
        (CHAT, {"stream": True}, True, USAGE_ON),
        ("/v1/completions", {"stream": True, "stream_options": {}}, True, USAGE_ON),
        ("/v1/completions", {"stream": True, "stream_options": {"include_usage": False}}, True, USAGE_ON),
        (CHAT, {"stream": True, "stream_options": USAGE_ON}, False, USAGE_ON),
        (CHAT, {"stream": True, "stream_options": CONTINUOUS}, False, CONTINUOUS),
        (CHAT, {"stream": True, "stream_options": "x"}, False, "x"),
        (CHAT, {"stream": False}, False, None),
        (CHAT, {"stream": "true"}, False, None),
        ("/v1/responses", {"stream": True}, False, None),
    ],
)
def test_ask_only_when_nothing_was_asked(path: str, body: dict[str, Any], asked: bool, options: Any) -> None:
    assert ask(body, path) is asked
    assert body.get("stream_options") == options


def test_prepare_encodes_the_body_again_only_when_it_asked() -> None:
    raw = b'{"stream": false}'
    tap, sent = prepare({"stream": False}, "/v1/completions", raw)
    assert sent is raw and not tap.strip
    tap, sent = prepare({"stream": True, "model": "m"}, "/v1/completions", b"{}")
    assert tap.strip and json.loads(sent) == {
        "stream": True,
        "model": "m",
        "stream_options": {"include_usage": True},
    }
