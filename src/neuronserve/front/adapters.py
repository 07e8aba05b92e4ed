"""Which served model or LoRA adapter a request reaches: the one-model rewrite of an OpenAI body's
`model`, and SageMaker's `X-Amzn-SageMaker-Adapter-Identifier` header. Pure.

The header: a SageMaker endpoint with adapter inference components sends it on /invocations, naming
the adapter component the client invoked (aws/model-hosting-container-standards,
docs/sagemaker/05_lora_adapter_management.md); the container selects that adapter as the OpenAI
`model` field and TGI's `parameters.adapter_id` do (front/support.py). Here it must name an adapter
this endpoint serves (plan.request_support.lora_adapters), else a 4xx naming the served ones, in the
dialect's shape: 400 for OpenAI bodies, TGI's 422 and LMI's 424 for generate bodies.

Precedence when the header and the body both name one: they must agree. A body naming another *served
adapter* is a conflict the client must resolve (400 / 422 naming both), never a silent pick. A body
`model` naming no adapter (the base model's name, a client's placeholder such as "tgi", or none) is
not a choice of adapter: the header's adapter replaces it. A blank header is no header.
"""

from __future__ import annotations

import json
from typing import Any

from neuronserve.front.errors import BadRequest, FrontError, Invalid
from neuronserve.front.state import ServerState
from neuronserve.front.support import served_adapters
from neuronserve.types import RequestSupport, ServeOptions

ADAPTER_HEADER = "x-amzn-sagemaker-adapter-identifier"  # as looked up (HTTP names ignore case)
ADAPTER_HEADER_NAME = "X-Amzn-SageMaker-Adapter-Identifier"  # as messages name it: SageMaker's spelling


def header_adapter(value: str | None) -> str | None:
    """The adapter the header names; None when it is absent or blank."""
    name = (value or "").strip()
    return name or None


def _served(name: str, support: RequestSupport, err: type[FrontError]) -> None:
    if name not in support.lora_adapters:
        raise err(
            f"{ADAPTER_HEADER_NAME}={name!r} names no LoRA adapter this endpoint serves; "
            f"served adapters: {served_adapters(support)}"
        )


def _conflict(field: str, asked: str, name: str) -> str:
    return (
        f"{field}={asked!r} and {ADAPTER_HEADER_NAME}={name!r} name different LoRA adapters: "
        "send one, or the same in both"
    )


def openai_with_adapter(body: dict[str, Any], name: str, support: RequestSupport) -> bytes:
    """The OpenAI body with `model` set to the header's adapter, as the engine gets it (BadRequest when
    the adapter is not served or the body names another served adapter)."""
    _served(name, support, BadRequest)
    asked = body.get("model")
    if isinstance(asked, str) and asked != name and asked in support.lora_adapters:
        raise BadRequest(_conflict("model", asked, name))
    body["model"] = name
    return json.dumps(body).encode()


def generate_with_adapter(body: dict[str, Any], name: str | None, support: RequestSupport) -> dict[str, Any]:
    """A TGI/LMI generate body with `parameters.adapter_id` set to the header's adapter (Invalid, the
    dialect's validation error, when the adapter is not served or the body names another one)."""
    if name is None:
        return body
    _served(name, support, Invalid)
    params = body.get("parameters")
    if params is None:
        params = {}
    asked = params.get("adapter_id") if isinstance(params, dict) else None
    if not isinstance(params, dict) or not isinstance(asked, str | None):
        return body  # not an object, or an adapter_id that is no string: genparams says so
    if asked not in (None, "", name):
        raise Invalid(_conflict("parameters.adapter_id", str(asked), name))
    return {**body, "parameters": {**params, "adapter_id": name}}


def served_model_body(
    body: dict[str, Any], state: ServerState, opts: ServeOptions, adapter: bool = False
) -> bytes | None:
    """An OpenAI body naming a model the engine does not serve (or none, or "") rewritten to the base
    model.

    TGI and LMI serve one model and ignore the name; their users' clients send "tgi" or "dummy". With
    LoRA on the engine lists its adapters beside the base model (vLLM's /v1/models: the base model's
    names first, then each adapter: vLLM 0.11.0 vllm/entrypoints/openai/serving_models.py:102-121),
    and a name it lists (an adapter, an alias) is a choice that must reach it as sent; any other name
    still means the one base model, as without LoRA.
    None = forward the body unchanged (strict mode, no model known yet, `adapter`: the body names a
    served LoRA adapter, or nothing to change).
    """
    if adapter or opts.strict_model_name or not state.model_names:
        return None
    asked = body.get("model")
    if isinstance(asked, str) and asked in state.model_names:
        return None
    body["model"] = state.model_names[0]
    return json.dumps(body).encode()
