"""The request fields through which vLLM 0.11.0's published advisories (fixed in 0.11.1) are reached
on the routes the front forwards, refused here while the image's engine is 0.11.0. Pure.

Each refusal names its advisory (docs/RELIABILITY.md lists them with their sources):

- GHSA-69j4-grxj-j64p (CVE-2025-62426, fixed by vllm-project/vllm#27205): "the /v1/chat/completions
  and /tokenize endpoints allow a chat_template_kwargs request parameter that is used in the code
  before it is properly validated against the chat template"; its keys override the optional
  parameters of vLLM's `apply_hf_chat_template` (`tokenize`, `chat_template`, ...) and block the API
  server. What a chat template legitimately reads from it is a switch such as Qwen3's
  `enable_thinking`, so only `SAFE_TEMPLATE_KWARGS`, with short scalar values, pass.
- GHSA-mrw7-hf4f-83pf (CVE-2025-62164): `prompt_embeds` on the Completions API are loaded with
  `torch.load` and made dense without validation (memory corruption, possibly code execution);
  0.11.1 put them behind an opt-in (vllm-project/vllm#27204). Refused unless
  NEURONSERVE_ALLOW_PROMPT_EMBEDS=true.
- GHSA-pqhm-4wvf-2jg8 (CVE-2025-62372): multimodal embedding inputs of the wrong shape crash the
  engine ("the vLLM engine may crash if incorrect shape of embeddings is passed", vllm#27204, which
  added `enable_mm_embeds`). Chat content parts `image_embeds` / `audio_embeds` are refused under
  the same setting.

Every check applies to any JSON object forwarded (/v1/*, /tokenize, /invocations), not to one path:
the engine reads these fields wherever its request models declare them.
"""

from __future__ import annotations

from typing import Any

from neuronserve.front.errors import BadRequest

CHAT_TEMPLATE_KWARGS = "GHSA-69j4-grxj-j64p"
PROMPT_EMBEDS = "GHSA-mrw7-hf4f-83pf"
MM_EMBEDS = "GHSA-pqhm-4wvf-2jg8"
# Switches chat templates read (Qwen3 `enable_thinking`, DeepSeek-V3.1 / Granite `thinking`,
# `reasoning_effort`); none is a parameter of vLLM's or transformers' apply_chat_template.
SAFE_TEMPLATE_KWARGS = frozenset({"enable_thinking", "thinking", "reasoning_effort"})
MAX_KWARG_TEXT = 64
_EMBED_PARTS = frozenset({"image_embeds", "audio_embeds"})
_OPT_IN = "NEURONSERVE_ALLOW_PROMPT_EMBEDS=true (and the engine's own opt-in flag)"


def _refuse(advisory: str, what: str) -> BadRequest:
    return BadRequest(f"{what}: refused while the engine is vLLM 0.11.0 (advisory {advisory})")


def _template_kwargs(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise _refuse(CHAT_TEMPLATE_KWARGS, "chat_template_kwargs must be an object")
    for key, v in value.items():
        if key not in SAFE_TEMPLATE_KWARGS:
            allowed = ", ".join(sorted(SAFE_TEMPLATE_KWARGS))
            raise _refuse(CHAT_TEMPLATE_KWARGS, f"chat_template_kwargs key {key[:64]!r} (allowed: {allowed})")
        scalar = v is None or isinstance(v, bool | int | float)
        if not scalar and not (isinstance(v, str) and len(v) <= MAX_KWARG_TEXT):
            raise _refuse(
                CHAT_TEMPLATE_KWARGS,
                f"chat_template_kwargs.{key} must be a boolean, a number or a short string",
            )


def _embed_part(messages: Any) -> str | None:
    """The first content part of an embeddings type in a chat's messages, if any."""
    if not isinstance(messages, list):
        return None
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in _EMBED_PARTS:
                return str(kind)
    return None


def check(body: dict[str, Any], allow_embeds: bool) -> None:
    """Refuse (400, citing the advisory) a body that reaches a 0.11.0 advisory's vector."""
    _template_kwargs(body.get("chat_template_kwargs"))
    if allow_embeds:
        return
    if body.get("prompt_embeds") is not None:
        raise _refuse(PROMPT_EMBEDS, f"prompt_embeds needs {_OPT_IN}")
    part = _embed_part(body.get("messages"))
    if part is not None:
        raise _refuse(MM_EMBEDS, f"a message content part of type {part!r} needs {_OPT_IN}")
