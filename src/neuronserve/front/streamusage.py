"""A passed-through OpenAI stream's token counts, for the access log's `tokens_in` / `tokens_out`.

Why: the non-stream answers carry `usage`, which proxy.relay reads; a stream carries it only when the
client asked (`stream_options.include_usage`), so every stream was logged `tokens_in=- tokens_out=-`.

How, on /v1/chat/completions and /v1/completions (OpenAI's stream_options, vLLM's `should_include_usage`,
vllm/entrypoints/serve/utils/api_utils.py): a stream whose client did not ask for usage is sent to the
engine asking for it (`ask`), and the usage-only event the engine then adds (`"choices":[]`, right
before `data: [DONE]`) is taken out of what the client receives (`Tap.feed`). vLLM 0.32 also moves the
`system_fingerprint` of the terminal chunks (those with a `finish_reason`) to that usage event
(vllm/entrypoints/openai/chat_completion/serving.py, "Stamp the fingerprint on terminal chunks only"):
terminal chunks are held until the usage event arrives (it follows at once) and get it back, so the
client sees what it would have seen without the question. (With n > 1, a choice that ends while another
goes on has its terminal chunk passed on with the next token, without the fingerprint: never delayed.)
A stream whose client asked, and a /v1/responses stream (its `response.completed` event holds the
usage), pass untouched: their counts are read from the stream's last bytes at its end.

Per event the cost is a few C-level byte searches: nothing is parsed but the usage event and the
terminal chunks, once per stream.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping
from typing import Any

STREAM_ROUTES = frozenset({"/v1/chat/completions", "/v1/completions"})
TAIL_BYTES = 16384  # the end of a stream kept to read its usage (a response.completed event's end)
PENDING_MAX = 1 << 20  # an event longer than this without its end is passed on as it is
_SEP = b"\n\n"
_TERMINAL = b'"finish_reason":"'  # a string finish_reason (null elsewhere): the choice's last chunk
_NO_CHOICES = b'"choices":[]'
_IN = re.compile(rb'"(?:prompt_tokens|input_tokens)":\s*(\d+)')
_OUT = re.compile(rb'"(?:completion_tokens|output_tokens)":\s*(\d+)')


def counts(usage: Mapping[str, Any]) -> tuple[Any, Any]:
    """(prompt, completion) tokens of a usage object: the Chat/Completions names or the Responses ones."""
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    return prompt, usage.get("completion_tokens", usage.get("output_tokens"))


def ask(body: dict[str, Any], path: str) -> bool:
    """Ask the engine for a stream's usage the client did not ask for (editing `body`); True when it was
    asked, so the client's stream must lose the engine's usage event (Tap(strip=True)).

    Left alone: not a stream, another route, usage already asked for, or `stream_options` the front does
    not read as "nothing asked" (continuous usage, a value that is not an object: the engine judges)."""
    if path not in STREAM_ROUTES or body.get("stream") is not True:
        return False
    opts = body.get("stream_options")
    if opts is None:
        body["stream_options"] = {"include_usage": True}
        return True
    if isinstance(opts, dict) and not opts.get("include_usage") and not opts.get("continuous_usage_stats"):
        body["stream_options"] = {**opts, "include_usage": True}
        return True
    return False


def prepare(body: dict[str, Any], path: str, raw: bytes) -> tuple[Tap, bytes]:
    """The Tap of the answer to an OpenAI `body` on `path`, and the bytes to send the engine: `raw`,
    or the body encoded again when the usage was asked for (`ask`)."""
    strip = ask(body, path)
    return Tap(strip), (json.dumps(body).encode() if strip else raw)


def _data(event: bytes) -> Any:
    """The JSON of one `data: {...}` event, None when it is not one."""
    _, _, payload = event.partition(b"data:")
    try:
        return json.loads(payload)
    except ValueError:
        return None


def _stamped(event: bytes, fingerprint: Any) -> bytes:
    """A terminal chunk with the `system_fingerprint` vLLM would have put there (module docstring)."""
    doc = _data(event)
    if not isinstance(doc, dict) or doc.get("system_fingerprint") is not None:
        return event
    doc["system_fingerprint"] = fingerprint
    return b"data: " + json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode() + _SEP


class Tap:
    """One stream's bytes on their way to the client: the usage read (and, with `strip`, taken out)."""

    def __init__(self, strip: bool = False) -> None:
        self.strip = strip
        self._tail: deque[bytes] = deque()  # the stream's end, for its usage (not strip)
        self._kept = 0  # bytes in _tail
        self._pending = b""  # the start of an event whose end has not arrived (strip only)
        self._held: list[bytes] = []  # terminal chunks waiting for the usage event (strip only)
        self._usage: dict[str, Any] | None = None

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to send the client for `chunk` (with strip: whole events only)."""
        if not self.strip:
            self._keep(chunk)
            return chunk
        data = self._pending + chunk if self._pending else chunk
        if data.endswith(_SEP):  # the usual read: whole events, nothing to cut or copy
            whole, self._pending = data, b""
        else:
            cut = data.rfind(_SEP)
            if cut < 0:
                if len(data) > PENDING_MAX:
                    self._pending = b""
                    return data
                self._pending = data
                return b""
            cut += len(_SEP)
            whole, self._pending = data[:cut], data[cut:]
        if not self._held and _TERMINAL not in whole and _NO_CHOICES not in whole:
            return whole  # the common case: token chunks, passed on as they came
        return b"".join(self._event(e + _SEP) for e in whole[: -len(_SEP)].split(_SEP))

    def _keep(self, chunk: bytes) -> None:
        """Keep at least the stream's last TAIL_BYTES, as the chunks came (no copy per chunk)."""
        tail = self._tail
        tail.append(chunk)
        self._kept += len(chunk)
        while self._kept - len(tail[0]) >= TAIL_BYTES:
            self._kept -= len(tail.popleft())

    def _event(self, event: bytes) -> bytes:
        if _NO_CHOICES in event and b'"usage"' in event:
            doc = _data(event)
            if isinstance(doc, dict) and isinstance(doc.get("usage"), dict):
                self._usage = doc["usage"]
                return self._release(doc.get("system_fingerprint"))
        if _TERMINAL in event:
            self._held.append(event)
            return b""
        return self._release(None) + event

    def _release(self, fingerprint: Any) -> bytes:
        """The held terminal chunks, stamped with the usage event's fingerprint where they lack one."""
        held, self._held = self._held, []
        if fingerprint is None:
            return b"".join(held)
        return b"".join(_stamped(event, fingerprint) for event in held)

    def close(self) -> bytes:
        """What is still held back when the stream ends (a stream cut short never lost its bytes)."""
        rest, self._pending = self._release(None) + self._pending, b""
        return rest

    def usage(self) -> dict[str, Any]:
        """The stream's usage: the event taken out, else the last one in the stream's end; {} if none."""
        if self._usage is not None:
            return self._usage
        tail = b"".join(self._tail)[-TAIL_BYTES:]
        at = tail.rfind(b'"usage"')
        if at < 0:
            return {}
        end = tail[at:]
        found = {}
        for key, pattern in (("prompt_tokens", _IN), ("completion_tokens", _OUT)):
            match = pattern.search(end)
            if match:
                found[key] = int(match.group(1))
        return found
