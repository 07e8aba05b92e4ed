"""Re-split a response stream into lines.

SageMaker cuts the container's chunked body into `PayloadPart`s at arbitrary byte boundaries: a part
can end mid-line, mid-JSON and even mid-UTF-8 character. So lines are reassembled from bytes first and
decoded only once complete. Works for SSE (`data: {...}`) and JSON Lines alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from neuronserve.errors import NeuronServeError


class StreamError(NeuronServeError):
    """The endpoint reported a failure mid-stream (ModelStreamError / InternalStreamFailure)."""


class LineBuffer:
    """Feed byte parts, get back the complete lines (without their line ending) they close."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, part: bytes) -> list[bytes]:
        self._pending += part
        *complete, rest = self._pending.split(b"\n")
        self._pending = bytearray(rest)
        return [bytes(line).removesuffix(b"\r") for line in complete]

    def flush(self) -> list[bytes]:
        """The last line when the stream did not end with a newline."""
        rest, self._pending = bytes(self._pending), bytearray()
        return [rest.removesuffix(b"\r")] if rest else []


def lines_from_parts(parts: Iterable[bytes]) -> Iterator[str]:
    buffer = LineBuffer()
    for part in parts:
        for line in buffer.feed(part):
            yield line.decode()
    for line in buffer.flush():
        yield line.decode()


def payload_parts(event_stream: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """The bytes of each PayloadPart of boto3's `invoke_endpoint_with_response_stream` Body.

    A mid-stream failure never arrives as an event dict: `ModelStreamError` and `InternalStreamFailure`
    are exception events (sagemaker-runtime service-2.json, `ResponseStream` members flagged
    `exception`), which botocore's parser turns into a raised `EventStreamError` whose Code is the
    event's type (botocore 1.44.5 parsers.py:992 `BaseEventStreamParser._do_error_parse`;
    eventstream.py:343 `to_response_dict` gives exception messages status 400, and :602-608
    `EventStream._parse_event` raises on it). A connection cut mid-body raises
    `ResponseStreamingError`. Both become one StreamError line.
    """
    from botocore.exceptions import EventStreamError, ResponseStreamingError

    iterator = iter(event_stream)
    while True:
        try:
            event = next(iterator)
        except StopIteration:
            return
        except EventStreamError as err:
            error = err.response.get("Error", {})
            detail = f"{error.get('Code', 'EventStreamError')}: {error.get('Message', '')}".strip()
            raise StreamError(f"{detail} (the endpoint failed mid-stream; its logs say why)") from None
        except ResponseStreamingError as err:
            raise StreamError(f"response stream broken: {err}") from None
        if "PayloadPart" in event:
            yield event["PayloadPart"]["Bytes"]


def events(lines: Iterable[str]) -> Iterator[Any]:
    """JSON objects from SSE `data:` lines or JSON Lines; SSE comments, blank lines and [DONE] skipped."""
    for line in lines:
        text = line.strip()
        if not text or text.startswith(":"):
            continue
        if text.startswith("data:"):
            text = text[len("data:") :].strip()
            if text == "[DONE]":
                return
        elif text.startswith(("event:", "id:", "retry:")):
            continue
        yield json.loads(text)


def text_of(event: Any) -> str:
    """The new text in one streamed event: OpenAI chat/completion chunks or TGI/LMI token events."""
    if isinstance(event, dict):
        if event.get("choices"):
            choice = event["choices"][0]
            delta = choice.get("delta") or {}
            return str(delta.get("content") or choice.get("text") or "")
        token = event.get("token")
        if isinstance(token, dict) and not token.get("special"):
            return str(token.get("text", ""))
    return ""
