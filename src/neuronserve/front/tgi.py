"""TGI/LMI "generate" schema <-> the engine's OpenAI completions API. Pure functions, no I/O.

Request: {"inputs": str, "parameters": {...}, "stream": bool}. Answer: [{"generated_text": ...,
"details": {...}}]; stream: one event per token {"token": {...}, "generated_text": null|full, "details"}.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from neuronserve.front.errors import FrontError

ACCEPTED_PARAMETERS = (
    "max_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "repetition_penalty",
    "do_sample",
    "stop",
    "seed",
    "return_full_text",
    "details",
    "decoder_input_details",
    "top_n_tokens",
)
DEFAULT_MAX_NEW_TOKENS = 20  # TGI's default

_FINISH = {"length": "length", "stop": "eos_token", "abort": "length"}


@dataclass
class TgiRequest:
    """What translation needs to remember to shape the answer."""

    prompt: str
    stream: bool
    details: bool
    full_text: bool
    top_n: int
    seed: int | None
    stop: list[str] = field(default_factory=list)


def _bad(msg: str) -> FrontError:
    return FrontError(422, f"invalid TGI request: {msg}")


def _number(params: dict[str, Any], name: str, *, lo: float, hi: float | None, lo_open: bool) -> float | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(f"parameters.{name} must be a number, got {value!r}")
    too_low = value <= lo if lo_open else value < lo
    if too_low or (hi is not None and value > hi):
        bound = f"{'>' if lo_open else '>='} {lo}" + (f" and <= {hi}" if hi is not None else "")
        raise _bad(f"parameters.{name} must be {bound}, got {value!r}")
    return float(value)


def _int(params: dict[str, Any], name: str, *, lo: int) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise _bad(f"parameters.{name} must be an integer >= {lo}, got {value!r}")
    return value


def _bool(params: dict[str, Any], name: str) -> bool | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise _bad(f"parameters.{name} must be true or false, got {value!r}")
    return value


def translate_request(body: dict[str, Any], model: str | None) -> tuple[TgiRequest, dict[str, Any]]:
    """Validate a TGI body (422 on bad values) and build the /v1/completions body."""
    inputs = body.get("inputs")
    if not isinstance(inputs, str):
        raise _bad(f"'inputs' must be a string, got {type(inputs).__name__}")
    params = body.get("parameters")
    params = {} if params is None else params
    if not isinstance(params, dict):
        raise _bad("'parameters' must be an object")
    unknown = sorted(set(params) - set(ACCEPTED_PARAMETERS))
    if unknown:
        raise _bad(f"unknown parameters {unknown}; accepted: {', '.join(ACCEPTED_PARAMETERS)}")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("'stream' must be true or false")

    max_new = _int(params, "max_new_tokens", lo=1)
    temperature = _number(params, "temperature", lo=0.0, hi=None, lo_open=False)
    top_p = _number(params, "top_p", lo=0.0, hi=1.0, lo_open=True)
    top_k = _int(params, "top_k", lo=1)
    rep = _number(params, "repetition_penalty", lo=0.0, hi=None, lo_open=True)
    do_sample = _bool(params, "do_sample")
    seed = _int(params, "seed", lo=0)
    full_text = bool(_bool(params, "return_full_text"))
    details = bool(_bool(params, "details"))
    decoder_details = bool(_bool(params, "decoder_input_details"))
    top_n = _int(params, "top_n_tokens", lo=0) or 0
    stop = params.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise _bad("parameters.stop must be a string or a list of strings")

    out: dict[str, Any] = {"prompt": inputs, "max_tokens": max_new or DEFAULT_MAX_NEW_TOKENS}
    if model:
        out["model"] = model
    # TGI samples only when asked (do_sample, or a sampling knob set); otherwise greedy.
    sampling = do_sample if do_sample is not None else any(v is not None for v in (temperature, top_p, top_k))
    if not sampling:
        out["temperature"] = 0.0
    else:
        if temperature is not None:
            out["temperature"] = temperature
        if top_p is not None:
            out["top_p"] = top_p
        if top_k is not None:
            out["top_k"] = top_k
    if rep is not None:
        out["repetition_penalty"] = rep
    if seed is not None:
        out["seed"] = seed
    if stop:
        out["stop"] = stop
    out["return_token_ids"] = True  # token ids for TGI's token objects (ignored by engines without it)
    if details or top_n:
        out["logprobs"] = max(1, top_n)
    if decoder_details:
        out["prompt_logprobs"] = 0
    if stream:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    req = TgiRequest(inputs, stream, details, full_text, top_n, seed, stop)
    return req, out


def _finish(reason: str | None, stop: list[str], stop_reason: Any) -> str:
    if reason == "stop" and (stop_reason is not None and stop_reason in stop):
        return "stop_sequence"
    return _FINISH.get(reason or "", reason or "length")


def token_texts(texts: list[str], text: str, offsets: list[Any] | None) -> list[str]:
    """Per-token texts that join to exactly `text`, the text the engine answered.

    TGI clients rebuild the answer by joining token texts. The engine's per-token strings do not
    always join to its text: a character split over byte-level tokens decodes to "" for each
    partial token, and the whole character (or U+FFFD for invalid bytes) appears in the text with
    a later token. The engine's `text_offset`s say where each token starts in the text, so when
    they are consistent the text is cut at them; otherwise everything goes to the last token.
    """
    if "".join(texts) == text or not texts:
        return texts
    if offsets and len(offsets) == len(texts) and all(type(o) is int for o in offsets):
        cuts = [o - offsets[0] for o in offsets] + [len(text)]
        if all(0 <= a <= b for a, b in itertools.pairwise(cuts)):
            return [text[a:b] for a, b in itertools.pairwise(cuts)]
    return [""] * (len(texts) - 1) + [text]


def _tokens(choice: dict[str, Any], text: str | None = None) -> list[dict[str, Any]]:
    """Per-token entries from OpenAI completion logprobs (+ token_ids when the engine returns them);
    with `text`, the token texts are made to join to it (see `token_texts`)."""
    lp = choice.get("logprobs") or {}
    texts = lp.get("tokens") or []
    if text is not None:
        texts = token_texts(list(texts), text, lp.get("text_offset"))
    logprobs = lp.get("token_logprobs") or []
    ids = choice.get("token_ids") or []
    out = []
    for i, text_i in enumerate(texts):
        out.append(
            {
                "id": ids[i] if i < len(ids) else None,
                "text": text_i,
                "logprob": logprobs[i] if i < len(logprobs) else None,
                "special": False,
            }
        )
    return out


def _top_tokens(choice: dict[str, Any]) -> list[list[dict[str, Any]]]:
    top = (choice.get("logprobs") or {}).get("top_logprobs") or []
    return [
        [{"id": None, "text": t, "logprob": v, "special": False} for t, v in (entry or {}).items()]
        for entry in top
    ]


def translate_response(req: TgiRequest, resp: dict[str, Any]) -> tuple[list[dict[str, Any]], int | None]:
    """Engine completion JSON -> (TGI answer list, generated token count)."""
    choice = (resp.get("choices") or [{}])[0]
    text = choice.get("text") or ""
    usage = resp.get("usage") or {}
    n_out = usage.get("completion_tokens")
    item: dict[str, Any] = {"generated_text": req.prompt + text if req.full_text else text}
    if req.details:
        details: dict[str, Any] = {
            "finish_reason": _finish(choice.get("finish_reason"), req.stop, choice.get("stop_reason")),
            "generated_tokens": n_out,
            "seed": req.seed,
            "prefill": [],
            "tokens": _tokens(choice, text),
        }
        if req.top_n:
            details["top_tokens"] = _top_tokens(choice)
        plp = choice.get("prompt_logprobs")
        if isinstance(plp, list):
            details["prefill"] = [
                {"id": int(tid), "text": v.get("decoded_token"), "logprob": v.get("logprob")}
                for entry in plp
                if entry
                for tid, v in list(entry.items())[:1]
            ]
        item["details"] = details
    return [item], n_out


class StreamTranslator:
    """Turns engine completion chunks (parsed SSE data) into TGI stream events (dicts)."""

    def __init__(self, req: TgiRequest) -> None:
        self.req = req
        self.text: list[str] = []
        self.count = 0
        self.usage: dict[str, Any] = {}

    def feed(self, data: str) -> list[dict[str, Any]]:
        if data.strip() == "[DONE]":
            return []
        chunk = json.loads(data)
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not choices:
            return []
        choice = choices[0]
        piece = choice.get("text") or ""
        reason = choice.get("finish_reason")
        # One event per token when logprobs give the split (a token whose bytes do not yet make a
        # character arrives with empty text and still gets its event), else one per chunk. Token
        # texts always join to the chunk's text, so joining them rebuilds the answer.
        toks = _tokens(choice, piece)
        if not piece and not toks and reason is None:
            return []
        if not toks:  # an empty final chunk stands for the end-of-sequence token (TGI: special)
            ids = choice.get("token_ids") or []
            tid = ids[0] if len(ids) == 1 else None
            toks = [{"id": tid, "text": piece, "logprob": None, "special": not piece}]
        tops = _top_tokens(choice) if self.req.top_n else []
        events = []
        for i, tok in enumerate(toks):
            if not tok["special"]:
                self.count += 1
                self.text.append(tok["text"])
            event: dict[str, Any] = {"token": tok, "generated_text": None, "details": None}
            if self.req.top_n:
                event["top_tokens"] = tops[i] if i < len(tops) else []
            if reason is not None and i == len(toks) - 1:
                full = "".join(self.text)
                event["generated_text"] = self.req.prompt + full if self.req.full_text else full
                if self.req.details:
                    event["details"] = {
                        "finish_reason": _finish(reason, self.req.stop, choice.get("stop_reason")),
                        "generated_tokens": self.count,
                        "seed": self.req.seed,
                    }
            events.append(event)
        return events


def encode_event(event: dict[str, Any], jsonlines: bool) -> bytes:
    data = json.dumps(event, ensure_ascii=False)
    return (data + "\n").encode() if jsonlines else f"data:{data}\n\n".encode()
