"""LMI's rolling-batch answer shapes (the `lmi` generate dialect). Pure.

Reference: deepjavalibrary/djl-serving serving/docs/lmi/user_guides/lmi_input_output_schema.md,
"Rolling Batch/Continuous Batch Schema": a JSON object (not TGI's list) {"generated_text",
"details"?: {finish_reason, generated_tokens, inputs, tokens, prefill?, best_of_sequences?}};
tokens are {"id", "text", "log_prob"}. Streams are `application/jsonlines` by default
(`OPTION_OUTPUT_FORMATTER=sse` for `data:` events), one {"token": ...} per line, the last line
adding "generated_text" and "details". Errors: {"error", "code"} before generation starts; a stream
that fails after its 200 ends with LMI's error token line (finish_reason "error").
"""

from __future__ import annotations

from typing import Any

from neuronserve.front import tgi
from neuronserve.front.completion_reader import Event, Seq, Tok
from neuronserve.front.genparams import GenRequest
from neuronserve.front.jsonbits import value


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": message, "code": status}


def stream_error_event() -> dict[str, Any]:
    return {
        "token": {"id": -1, "text": "", "log_prob": -1, "special_token": True},
        "generated_text": "",
        "details": {"finish_reason": "error", "generated_tokens": None, "inputs": None},
    }


def _tok(t: Tok) -> dict[str, Any]:
    return {"id": t.id, "text": t.text, "log_prob": t.logprob}


def _details(req: GenRequest, seq: Seq) -> dict[str, Any]:
    out: dict[str, Any] = {
        "finish_reason": seq.finish_reason,
        "generated_tokens": seq.generated,
        "inputs": req.prompt,
        "tokens": [_tok(t) for t in seq.tokens],
    }
    if req.decoder_details:
        out["prefill"] = [_tok(t) for t in seq.prefill]
    if req.top_n:
        out["top_tokens"] = [[_tok(t) for t in row] for row in seq.top]
    return out


def response(req: GenRequest, seqs: list[Seq]) -> dict[str, Any]:
    best = seqs[0]
    item: dict[str, Any] = {"generated_text": req.answer_text(best.text)}
    if req.details or len(seqs) > 1:
        details = _details(req, best)
        if len(seqs) > 1:
            details["best_of_sequences"] = [
                {
                    "finish_reason": s.finish_reason,
                    "generated_tokens": s.generated,
                    "tokens": [_tok(t) for t in s.tokens],
                    "generated_text": req.answer_text(s.text),
                }
                for s in seqs[1:]
            ]
        item["details"] = details
    return item


def stream_event(req: GenRequest, event: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"token": _tok(event.token)}
    if event.final is not None:
        reason, count, text = event.final
        out["generated_text"] = req.answer_text(text)
        if req.details:
            out["details"] = {"finish_reason": reason, "generated_tokens": count, "inputs": req.prompt}
    return out


def stream_bytes(req: GenRequest, event: Event, jsonlines: bool) -> bytes:
    """tgi.encode_event(stream_event(req, event), jsonlines), byte for byte (front/jsonbits.py); every
    token but the last is written into the event's fixed text."""
    if event.final is not None:
        return tgi.encode_event(stream_event(req, event), jsonlines)
    t = event.token
    data = f'{{"token": {{"id": {value(t.id)}, "text": {value(t.text)}, "log_prob": {value(t.logprob)}}}}}'
    return (data + "\n").encode() if jsonlines else f"data:{data}\n\n".encode()
