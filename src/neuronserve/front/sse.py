"""Incremental Server-Sent-Events parsing that survives arbitrary byte boundaries.

Why: engine streams arrive (and SageMaker re-delivers them as PayloadParts) cut anywhere, even inside
a UTF-8 character or between \\r and \\n. The parser keeps the incomplete tail and yields whole events.
"""

from __future__ import annotations


class SSEParser:
    """feed(bytes) -> list of event data strings (multi-line `data:` fields joined with \\n)."""

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        # one split per read (the whole lines, and the tail kept): cutting the buffer line by line
        # copied its rest once per line, quadratic in a read that holds many events
        lines = (self._buf + chunk if self._buf else chunk).split(b"\n")
        self._buf = lines.pop()
        events: list[str] = []
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
                continue
            if line.startswith(b"data:"):  # the common case: no partition, no other field
                value = line[5:].decode("utf-8")
                self._data.append(value[1:] if value.startswith(" ") else value)
                continue
            text = line.decode("utf-8")
            if text.startswith(":"):
                continue  # comment / keep-alive
            field, _, value = text.partition(":")
            if field == "data":
                self._data.append(value[1:] if value.startswith(" ") else value)
        return events

    def close(self) -> list[str]:
        """End of stream: a final event not followed by a blank line still counts."""
        events = self.feed(b"\n\n") if self._buf else []
        if self._data:
            events.append("\n".join(self._data))
            self._data = []
        return events


class LineParser:
    """feed(bytes) -> complete lines, for application/jsonlines streams."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[str]:
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        return [ln.decode("utf-8").rstrip("\r") for ln in lines if ln.strip()]

    def close(self) -> list[str]:
        rest, self._buf = self._buf, b""
        return [rest.decode("utf-8")] if rest.strip() else []
