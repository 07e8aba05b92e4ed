"""What a request needs of the engine, read from its body, and its refusal when the plan says the
planned engine cannot give it (`RequestSupport`, plan.request_support). Pure.

Why the front refuses instead of forwarding: vllm-neuron 0.2.2+lts with on-device sampling (its
default) silently ignores most of what vLLM accepts. Its sampler honours only temperature, top_k and
top_p (`get_nxd_sampling_params`, worker/neuronx_distributed_model_runner.py:1244-1278), returns no
prompt logprobs (`prompt_logprobs_dict={}`, :484) and no sample logprobs when sampling on the device
(:473-475), and `execute_model` never applies vLLM's grammar bitmask, so JSON schemas, regexes and
choices are not enforced. A request asking for any of these would get an answer that looks right and
is not; it is refused before it reaches the engine, naming the field and ending with `support.why`.

What needs what (field names are vLLM 0.11.0's, tests/data/vllm-0.11.0-request-fields.json):
- penalties: `presence_penalty`, `frequency_penalty` (neutral 0), `repetition_penalty` (neutral 1),
  `min_p` (neutral 0), and a non-empty `logit_bias`, `allowed_token_ids` or `bad_words`: they change
  the distribution the engine samples from, on the host logits the device sampler never produces.
- logprobs: OpenAI `logprobs` (chat: true; completions: any integer, 0 included: the sampled token's
  logprob), `top_logprobs` > 0, `best_of` > 1 and `use_beam_search` (both rank sequences by their
  logprobs); TGI `top_n_tokens` > 0 and `best_of` > 1, LMI `logprobs` > 0 and `n` > 1 (the front picks
  the most likely sequence by its logprobs).
- prompt_logprobs: OpenAI/LMI `prompt_logprobs` (any integer), TGI `decoder_input_details: true`
  (TGI answers the prompt tokens with their logprobs: the prefill).
- structured_outputs: `response_format` of any type but "text" (json_object is JSON enforced by a
  grammar too), `structured_outputs` / `guided_json|regex|choice|grammar` / `structural_tag`,
  TGI `grammar`, and a `tool_choice` of "required" or a named function: vLLM forces those calls'
  arguments with structured outputs, so without the grammar a named call's "arguments" are free text.
  `tool_choice` "auto" (a tool-call parser reads the model's own output) stays allowed.

Never refused: TGI `details` (its own client sends `details: true` on every call): the tokens are
served from their ids, with `logprob` null where the engine has none. Neutral values (penalty 0,
`min_p` 0, `repetition_penalty` 1, `logprobs` false, `top_logprobs` 0) pass, because clients send them
by default.

LoRA: a request names an adapter with the OpenAI `model` field (vLLM's own rule: a served adapter's
name is a model id) or TGI's `parameters.adapter_id`. With `support.adapter_required` (0.2.2+lts
with LoRA on: `_prepare_adapter_id_in_new_request` reads `request_data.lora_request.lora_name` of
every new request, runner :971-977, an AttributeError inside the engine step when the request named
no adapter), a request naming no served adapter is refused here, listing the served ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeGuard

from neuronserve.front.errors import BadRequest, Invalid
from neuronserve.types import RequestSupport

# A body key -> (capability, neutral value); numbers equal to the neutral value ask for nothing.
_PENALTIES = {"presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0, "min_p": 0.0}
# Fields vLLM's sampler applies to the host logits, which on-device sampling never materializes: the
# device returns sampled token ids (runner :1244-1278 passes it temperature, top_k and top_p only).
_LOGIT_MASKS = ("logit_bias", "allowed_token_ids", "bad_words")
# OpenAI structured-output fields (vLLM 0.11.0 ChatCompletionRequest / CompletionRequest).
_GUIDED = ("guided_json", "guided_regex", "guided_choice", "guided_grammar", "structural_tag")
_STRUCTURED_KEYS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")


@dataclass(frozen=True)
class Need:
    """One field of a request that needs one capability: `field` as the client wrote it."""

    capability: str
    field: str
    value: Any


def _number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _count(v: Any) -> int:
    """An integer count asked for (0 when absent, not a number, or not positive)."""
    return int(v) if _number(v) and v > 0 else 0


def _penalties(fields: dict[str, Any], prefix: str) -> Iterator[Need]:
    for name, neutral in _PENALTIES.items():
        v = fields.get(name)
        if _number(v) and v != neutral:
            yield Need("penalties", prefix + name, v)
    for name in _LOGIT_MASKS:
        v = fields.get(name)
        if isinstance(v, dict | list) and v:  # empty ({} / []) asks for nothing, as clients send it
            yield Need("penalties", prefix + name, v)


def _structured(v: Any) -> bool:
    """A `structured_outputs` object that constrains something (flags alone do not)."""
    return isinstance(v, dict) and any(v.get(k) not in (None, False) for k in _STRUCTURED_KEYS)


def _response_format(v: Any) -> bool:
    return isinstance(v, dict) and v.get("type") not in (None, "text")


def openai_needs(body: dict[str, Any]) -> list[Need]:
    """The needs of an OpenAI chat or completions body (also /v1/responses' fields of the same name)."""
    out = list(_penalties(body, ""))
    logprobs = body.get("logprobs")
    chat = "messages" in body  # chat: a boolean (0 reads as false); completions: a count, 0 included
    if logprobs is True or (_number(logprobs) and (logprobs > 0 if chat else logprobs >= 0)):
        out.append(Need("logprobs", "logprobs", logprobs))
    for name in ("top_logprobs", "best_of"):
        v = body.get(name)
        if _count(v) > (1 if name == "best_of" else 0):
            out.append(Need("logprobs", name, v))
    if body.get("use_beam_search") is True:
        out.append(Need("logprobs", "use_beam_search", True))
    if body.get("prompt_logprobs") is not None:
        out.append(Need("prompt_logprobs", "prompt_logprobs", body["prompt_logprobs"]))
    out.extend(_openai_structured(body))
    return out


def _openai_structured(body: dict[str, Any]) -> Iterator[Need]:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and _response_format(fmt):
        yield Need("structured_outputs", "response_format.type", fmt.get("type"))
    text = body.get("text")
    text_format = text.get("format") if isinstance(text, dict) else None
    if isinstance(text_format, dict) and _response_format(text_format):  # /v1/responses: text.format
        yield Need("structured_outputs", "text.format.type", text_format.get("type"))
    if _structured(body.get("structured_outputs")):
        yield Need("structured_outputs", "structured_outputs", body["structured_outputs"])
    for name in _GUIDED:
        if body.get(name) is not None:
            yield Need("structured_outputs", name, body[name])
    choice = body.get("tool_choice")
    if choice == "required" or isinstance(choice, dict):
        yield Need("structured_outputs", "tool_choice", choice)


def generate_needs(params: dict[str, Any]) -> list[Need]:
    """The needs of a TGI/LMI generate body's `parameters` (already validated by genparams)."""
    p = "parameters."
    out = list(_penalties(params, p))
    for name, floor in (("top_n_tokens", 0), ("logprobs", 0), ("best_of", 1), ("n", 1)):
        if _count(params.get(name)) > floor:
            out.append(Need("logprobs", p + name, params[name]))
    if params.get("decoder_input_details") is True:
        out.append(Need("prompt_logprobs", p + "decoder_input_details", True))
    if params.get("prompt_logprobs") is not None:
        out.append(Need("prompt_logprobs", p + "prompt_logprobs", params["prompt_logprobs"]))
    if params.get("grammar") is not None:
        out.append(Need("structured_outputs", p + "grammar", params["grammar"]))
    return out


def refusal(need: Need, support: RequestSupport) -> str:
    why = support.why.get(need.capability) or f"the planned engine does not serve {need.capability}"
    return f"{need.field}={need.value!r} cannot be served by this endpoint: {why}"


def _first_refused(needs: list[Need], support: RequestSupport) -> Need | None:
    return next((n for n in needs if not support.allows(n.capability)), None)


def served_adapters(support: RequestSupport) -> str:
    return ", ".join(support.lora_adapters) if support.lora_adapters else "none"


def _adapter_required(asked: str, support: RequestSupport) -> str:
    return (
        f"{asked} names no LoRA adapter this endpoint serves, and this engine (vllm-neuron with LoRA on) "
        f"serves every request with an adapter; served adapters: {served_adapters(support)}"
    )


def check_openai(body: dict[str, Any], support: RequestSupport) -> bool:
    """Refuse (BadRequest: 400 in the OpenAI shape) what the engine cannot serve; True when the body's
    `model` names a served adapter (so it must reach the engine as it is)."""
    refused = _first_refused(openai_needs(body), support)
    if refused is not None:
        raise BadRequest(refusal(refused, support))
    model = body.get("model")
    if isinstance(model, str) and model in support.lora_adapters:
        return True
    if support.adapter_required:
        raise BadRequest(_adapter_required(f"model={model!r}", support))
    return False


def check_generate(params: dict[str, Any], support: RequestSupport) -> None:
    """Refuse (Invalid: 422 for TGI, 424 in LMI's dialect) what the engine cannot serve, and a request
    naming no adapter where one is required (`adapter_id` itself is checked by genparams)."""
    refused = _first_refused(generate_needs(params), support)
    if refused is not None:
        raise Invalid(refusal(refused, support))
    if support.adapter_required and not params.get("adapter_id"):
        raise Invalid(_adapter_required(f"parameters.adapter_id={params.get('adapter_id')!r}", support))


__all__ = [
    "Need",
    "check_generate",
    "check_openai",
    "generate_needs",
    "openai_needs",
    "refusal",
    "served_adapters",
]
