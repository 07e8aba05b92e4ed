"""TGI's answer shapes (huggingface/text-generation-inference docs/openapi.json). Pure.

GenerateResponse {"generated_text", "details"?}: `/generate` answers one, `/` and `/invocations`
a list (the compat route). Details: finish_reason, generated_tokens, seed, prefill, tokens,
top_tokens (top_n_tokens), best_of_sequences (best_of > 1). StreamResponse per token:
{"token", "top_tokens"?, "generated_text": null | full, "details": null | {finish_reason,
generated_tokens, seed}}. Errors: ErrorResponse {"error", "error_type"}.
"""

from __future__ import annotations

from typing import Any

from neuronserve.front.completion_reader import Event, Seq, Tok
from neuronserve.front.errors import TGI_ERROR_TYPES
from neuronserve.front.genparams import GenRequest
from neuronserve.front.jsonbits import ENCODE, value


def error_body(status: int, message: str) -> dict[str, Any]:
    return {
        "error": message,
        "error_type": TGI_ERROR_TYPES.get(status, "generation" if status < 500 else "error"),
    }


def _tok(t: Tok) -> dict[str, Any]:
    return {"id": t.id, "text": t.text, "logprob": t.logprob, "special": t.special}


def _prefill(t: Tok) -> dict[str, Any]:
    return {"id": t.id, "text": t.text, "logprob": t.logprob}


def _seq_details(req: GenRequest, seq: Seq) -> dict[str, Any]:
    out: dict[str, Any] = {
        "finish_reason": seq.finish_reason,
        "generated_tokens": seq.generated,
        "seed": req.seed,
        "prefill": [_prefill(t) for t in seq.prefill],
        "tokens": [_tok(t) for t in seq.tokens],
    }
    if req.top_n:
        out["top_tokens"] = [[_tok(t) for t in row] for row in seq.top]
    return out


def response(req: GenRequest, seqs: list[Seq]) -> dict[str, Any]:
    """One GenerateResponse: the most likely sequence, the others as best_of_sequences."""
    best = seqs[0]
    item: dict[str, Any] = {"generated_text": req.answer_text(best.text)}
    if req.details:
        details = _seq_details(req, best)
        if len(seqs) > 1:
            details["best_of_sequences"] = [
                {"generated_text": req.answer_text(s.text), **_seq_details(req, s)} for s in seqs[1:]
            ]
        item["details"] = details
    return item


def stream_event(req: GenRequest, event: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"token": _tok(event.token), "generated_text": None, "details": None}
    if req.top_n:
        out["top_tokens"] = [_tok(t) for t in event.top]
    if event.final is not None:
        reason, count, text = event.final
        out["generated_text"] = req.answer_text(text)
        if req.details:
            out["details"] = {"finish_reason": reason, "generated_tokens": count, "seed": req.seed}
    return out


def encode_event(event: dict[str, Any], jsonlines: bool) -> bytes:
    data = ENCODE(event)  # json.dumps(event, ensure_ascii=False), without building an encoder per call
    return (data + "\n").encode() if jsonlines else f"data:{data}\n\n".encode()


_TAIL = '}, "generated_text": null, "details": null}'


def stream_bytes(req: GenRequest, event: Event, jsonlines: bool) -> bytes:
    """encode_event(stream_event(req, event), jsonlines), byte for byte (front/jsonbits.py); a token
    that is neither the last nor carries top tokens (all but one per stream) is written into the
    event's fixed text."""
    if req.top_n or event.final is not None:
        return encode_event(stream_event(req, event), jsonlines)
    t = event.token
    data = (
        f'{{"token": {{"id": {value(t.id)}, "text": {value(t.text)}, "logprob": {value(t.logprob)}, '
        f'"special": {value(t.special)}{_TAIL}'
    )
    return (data + "\n").encode() if jsonlines else f"data:{data}\n\n".encode()


def info(
    *,
    model_id: str | None,
    dtype: str,
    device: str,
    max_model_len: int | None,
    max_concurrency: int,
    version: str,
    limits: dict[str, int],
) -> dict[str, Any]:
    """GET /info: TGI's Info object with our own values (components.schemas.Info). Keyword-only: seven
    values of one shape, easy to swap by position."""
    total = max_model_len or 0
    return {
        "model_id": model_id or "",
        "model_sha": None,
        "model_dtype": dtype,
        "model_device_type": device,
        "model_pipeline_tag": "text-generation",
        "max_concurrent_requests": max_concurrency,
        "max_best_of": limits["best_of"],
        "max_stop_sequences": limits["stop"],
        "max_input_tokens": max(total - 1, 0),
        "max_total_tokens": total,
        "validation_workers": 1,
        "max_client_batch_size": limits["batch"],
        "router": "neuronserve",
        "version": version,
        "sha": None,
        "docker_label": None,
    }
