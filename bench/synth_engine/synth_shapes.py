"""The bytes of vLLM 0.11's OpenAI answers, built as cheaply as possible (the synthetic engine's hot path).

Field shapes follow vLLM's OpenAI server (vllm/entrypoints/openai/serving_completion.py and
serving_chat.py, protocol.py in vLLM 0.11.0 and later): a streamed completion chunk is
`CompletionStreamResponse.model_dump_json(exclude_unset=True)`, so every field the server sets is
present, `null` included (`logprobs`, `finish_reason`, `stop_reason`, `prompt_token_ids`,
`token_ids`); the finish reason rides on the last token's chunk; with `stream_options.include_usage`
a chunk with `"choices": []` and `usage` follows; the stream ends with `data: [DONE]`.

Each event is one token, as vLLM streams one chunk per engine step. Texts cycle through a small
vocabulary whose token ids are fixed, so the bytes of a token are computed once at import.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

WORDS = (
    " the", " model", " answers", " a", " question", " about", " numbers", " and", " then", " it",
    " streams", " one", " token", " per", " step", " to", " every", " client", " while", " others",
    " wait", " for", " their", " turn", " in", " the", " batch", " of", " sixty", " four", " slots", ".",
)  # fmt: skip
FIRST_ID = 1000
NULL = b"null"


def _token_parts() -> list[tuple[bytes, bytes]]:
    """(JSON string of the text, the `[id]` list) per vocabulary entry."""
    return [(json.dumps(w).encode(), f"[{FIRST_ID + i}]".encode()) for i, w in enumerate(WORDS)]


TOKENS = _token_parts()


def request_id(prefix: str, header: str | None) -> str:
    """vLLM takes the client's X-Request-Id as the base of its own id (else a random one)."""
    return f"{prefix}-{header or uuid.uuid4().hex}"


def prompt_tokens(prompt: Any) -> int:
    if isinstance(prompt, str):
        return max(1, len(prompt) // 4)
    if isinstance(prompt, list):
        return max(1, len(prompt))
    return 1


def chat_prompt_tokens(messages: Any) -> int:
    if not isinstance(messages, list):
        return 1
    return sum(prompt_tokens(m.get("content")) + 4 for m in messages if isinstance(m, dict)) or 1


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion}


def text_of(n: int) -> str:
    return "".join(WORDS[i % len(WORDS)] for i in range(n))


def ids_of(n: int) -> list[int]:
    return [FIRST_ID + i % len(WORDS) for i in range(n)]


class CompletionStream:
    """The SSE events of one streamed /v1/completions answer."""

    def __init__(self, rid: str, model: str, n: int, prompt_n: int, *, token_ids: bool, usage_chunk: bool):
        created = int(time.time())
        self.head = (
            f'data: {{"id":{json.dumps(rid)},"object":"text_completion","created":{created},'
            f'"model":{json.dumps(model)},"choices":[{{"index":0,"text":'
        ).encode()
        self.n, self.prompt_n, self.token_ids = n, prompt_n, token_ids
        self.prompt_ids = json.dumps(list(range(1, prompt_n + 1))).encode() if token_ids else NULL
        self.tail = (
            (
                f'data: {{"id":{json.dumps(rid)},"object":"text_completion","created":{created},'
                f'"model":{json.dumps(model)},"choices":[],"usage":{_compact(usage(prompt_n, n))}}}\n\n'
            ).encode()
            if usage_chunk
            else b""
        )

    def event(self, i: int) -> bytes:
        text, ids = TOKENS[i % len(TOKENS)]
        last = i == self.n - 1
        return b"".join((
            self.head, text, b',"logprobs":null,"finish_reason":', b'"length"' if last else NULL,
            b',"stop_reason":null,"prompt_token_ids":', self.prompt_ids if i == 0 else NULL,
            b',"token_ids":', ids if self.token_ids else NULL, b"}]}\n\n",
        ))  # fmt: skip

    def end(self) -> bytes:
        return self.tail + b"data: [DONE]\n\n"


class ChatStream:
    """The SSE events of one streamed /v1/chat/completions answer (a role chunk first, as vLLM)."""

    def __init__(self, rid: str, model: str, n: int, prompt_n: int, *, usage_chunk: bool):
        created = int(time.time())
        self.head = (
            f'data: {{"id":{json.dumps(rid)},"object":"chat.completion.chunk","created":{created},'
            f'"model":{json.dumps(model)},"choices":[{{"index":0,"delta":'
        ).encode()
        self.n = n
        self.tail = (
            (
                f'data: {{"id":{json.dumps(rid)},"object":"chat.completion.chunk","created":{created},'
                f'"model":{json.dumps(model)},"choices":[],"usage":{_compact(usage(prompt_n, n))}}}\n\n'
            ).encode()
            if usage_chunk
            else b""
        )

    def start(self) -> bytes:
        return self.head + b'{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'

    def event(self, i: int) -> bytes:
        text, _ = TOKENS[i % len(TOKENS)]
        last = i == self.n - 1
        return b"".join((
            self.head, b'{"content":', text, b'},"logprobs":null,"finish_reason":',
            b'"length","stop_reason":null' if last else NULL, b"}]}\n\n",
        ))  # fmt: skip

    def end(self) -> bytes:
        return self.tail + b"data: [DONE]\n\n"


def completion(rid: str, model: str, n: int, prompt_n: int, token_ids: bool) -> bytes:
    body = {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "text": text_of(n),
                "logprobs": None,
                "finish_reason": "length",
                "stop_reason": None,
                "prompt_logprobs": None,
                "prompt_token_ids": list(range(1, prompt_n + 1)) if token_ids else None,
                "token_ids": ids_of(n) if token_ids else None,
            }
        ],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage(prompt_n, n) | {"prompt_tokens_details": None},
        "kv_transfer_params": None,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def chat(rid: str, model: str, n: int, prompt_n: int) -> bytes:
    message: dict[str, object] = {
        "role": "assistant",
        "content": text_of(n),
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "tool_calls": [],
        "reasoning_content": None,
    }
    body = {
        "id": rid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": "length", "stop_reason": None}
        ],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage(prompt_n, n) | {"prompt_tokens_details": None},
        "prompt_logprobs": None,
        "kv_transfer_params": None,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def error(status: int, message: str, kind: str = "BadRequestError") -> bytes:
    """vLLM 0.11's ErrorResponse: a flat object."""
    body = {"object": "error", "message": message, "type": kind, "param": None, "code": status}
    return json.dumps(body).encode()


def metrics_text(model: str, running: int, requests: int, tokens: int) -> bytes:
    label = f'model_name="{model}"'
    return (
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{{{label}}} {running}\n"
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        f"vllm:num_requests_waiting{{{label}}} 0\n"
        "# HELP vllm:request_success_total Count of successfully processed requests.\n"
        "# TYPE vllm:request_success_total counter\n"
        f'vllm:request_success_total{{finished_reason="length",{label}}} {requests}\n'
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
        "# TYPE vllm:generation_tokens_total counter\n"
        f"vllm:generation_tokens_total{{{label}}} {tokens}\n"
    ).encode()
