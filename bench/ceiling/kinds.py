"""The work kinds of the ceiling table: what the client sends to the front, and the same work asked of
the engine directly.

"The same work" is the engine call the front makes for that request: an OpenAI request goes to the
engine as it is (passthrough, or vLLM's own /invocations for a SageMaker body); a TGI or LMI generate
body is translated by the front into one /v1/completions call (front/genparams.py `translate`:
greedy `temperature` 0, `return_token_ids`, and for a stream `stream_options.include_usage`), so the
direct side sends that translated body.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PROMPT = "The capital of France is"
STREAM_TOKENS = 256
PLAIN_TOKENS = 16

Body = Callable[[str], dict[str, Any]]


@dataclass(frozen=True)
class Kind:
    name: str
    label: str  # the row of the table
    dialect: str  # the serve it needs: NEURONSERVE_GENERATE_DIALECT
    front_path: str
    front_body: Body  # model name -> body
    direct_path: str
    direct_body: Body
    tokens: int
    stream: bool

    @property
    def unit(self) -> str:
        return "event" if self.stream else "request"


def _translated(tokens: int, stream: bool) -> Body:
    """The /v1/completions body the front sends the engine for a generate request (genparams.translate)."""

    def body(model: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "prompt": PROMPT,
            "max_tokens": tokens,
            "temperature": 0.0,
            "model": model,
            "return_token_ids": True,
        }
        if stream:
            out |= {"stream": True, "stream_options": {"include_usage": True}}
        return out

    return body


def _generate(tokens: int, stream: bool) -> Body:
    def body(_: str) -> dict[str, Any]:
        out: dict[str, Any] = {"inputs": PROMPT, "parameters": {"max_new_tokens": tokens}}
        if stream:
            out["stream"] = True
        return out

    return body


def _openai_stream(model: str) -> dict[str, Any]:
    # as an OpenAI client sends it: names the served model, so the front forwards the bytes unchanged
    return {"model": model, "prompt": PROMPT, "max_tokens": STREAM_TOKENS, "stream": True}


def _openai_plain(_: str) -> dict[str, Any]:
    # as a SageMaker invoke usually sends it: no model name (the front fills in the served one)
    return {"prompt": PROMPT, "max_tokens": PLAIN_TOKENS}


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "openai-stream",
            f"OpenAI stream, {STREAM_TOKENS} events, passthrough (/v1/completions)",
            "tgi",
            "/v1/completions",
            _openai_stream,
            "/v1/completions",
            _openai_stream,
            STREAM_TOKENS,
            stream=True,
        ),
        Kind(
            "tgi-stream",
            f"TGI stream, {STREAM_TOKENS} events, via /invocations (reframed)",
            "tgi",
            "/invocations",
            _generate(STREAM_TOKENS, stream=True),
            "/v1/completions",
            _translated(STREAM_TOKENS, stream=True),
            STREAM_TOKENS,
            stream=True,
        ),
        Kind(
            "lmi-stream",
            f"LMI stream, {STREAM_TOKENS} events, via /invocations (jsonlines)",
            "lmi",
            "/invocations",
            _generate(STREAM_TOKENS, stream=True),
            "/v1/completions",
            _translated(STREAM_TOKENS, stream=True),
            STREAM_TOKENS,
            stream=True,
        ),
        Kind(
            "tgi-plain",
            f"non-streamed, {PLAIN_TOKENS} tokens, TGI body via /invocations",
            "tgi",
            "/invocations",
            _generate(PLAIN_TOKENS, stream=False),
            "/v1/completions",
            _translated(PLAIN_TOKENS, stream=False),
            PLAIN_TOKENS,
            stream=False,
        ),
        Kind(
            "openai-plain",
            f"non-streamed, {PLAIN_TOKENS} tokens, OpenAI body via /invocations",
            "tgi",
            "/invocations",
            _openai_plain,
            "/invocations",
            _openai_plain,
            PLAIN_TOKENS,
            stream=False,
        ),
    )
}


def select(only: str | None) -> list[Kind]:
    if not only:
        return list(KINDS.values())
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        raise SystemExit(f"--only: unknown kind(s) {unknown}; known: {', '.join(KINDS)}")
    return [KINDS[n] for n in names]
