"""Real `application/vnd.amazon.eventstream` exception events (framed by deploy_support.event_message)
and a local HTTP server that answers InvokeEndpointWithResponseStream with them, so the real boto3
client and botocore's own event-stream parser decode them (no dicts stand in for events).

Framing (the AWS event stream encoding; botocore/eventstream.py decodes it: `EventStreamMessage`,
`_validate_prelude`, `_parse_headers`): total length u32, headers length u32, CRC32 of those 8 bytes,
the headers (name length u8, name, type 7 = string, value length u16, value), the payload, then the
CRC32 of everything before it. All big-endian.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from deploy_support import event_message, payload_part

__all__ = ["event_message", "exception", "payload_part", "runtime_server"]


def exception(kind: str, fields: dict[str, str]) -> bytes:
    """An exception event (`ModelStreamError`, `InternalStreamFailure`): JSON payload of its members."""
    return event_message(
        {":message-type": "exception", ":exception-type": kind, ":content-type": "application/json"},
        json.dumps(fields).encode(),
    )


@contextmanager
def runtime_server(stream: bytes) -> Iterator[tuple[str, list[bytes]]]:
    """A sagemaker-runtime stand-in on 127.0.0.1: every POST gets `stream` as its event-stream body.
    Yields the endpoint URL and the request bodies it received."""
    received: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.amazon.eventstream")
            self.send_header("X-Amzn-SageMaker-Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(stream)))
            self.end_headers()
            self.wfile.write(stream)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
