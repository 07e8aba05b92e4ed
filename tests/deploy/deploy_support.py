"""A real moto server on 127.0.0.1 for SageMaker, with the two patches moto 5.2.5 needs (shared/SERVING.md).

1. moto's ProductionVariant instance-type list stops at ml.inf1.*: Neuron types inf2/trn1/trn2 are added.
2. moto answers describe calls with empty `VpcConfig: {}` / `DataCaptureConfig: {}`, which the
   sagemaker-core shapes reject: empty dicts are dropped from those HTTP responses.
Both are applied with pytest's monkeypatch, so they end with the test that asked for the server.
"""

from __future__ import annotations

import binascii
import io
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

NEURON_PREFIXES = ("ml.inf2.", "ml.trn1.", "ml.trn1n.", "ml.trn2.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def patch_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.sagemaker import models

    original_validate = models.FakeEndpointConfig.validate_instance_type

    def validate_instance_type(self: Any, instance_type: str) -> None:
        if instance_type.startswith(NEURON_PREFIXES):
            return
        original_validate(self, instance_type)

    monkeypatch.setattr(models.FakeEndpointConfig, "validate_instance_type", validate_instance_type)

    from moto.core.responses import ActionResult
    from moto.sagemaker.responses import SageMakerResponse

    def drop_empty(original: Callable[[Any], ActionResult]) -> Callable[[Any], ActionResult]:
        def describe(self: Any) -> ActionResult:
            result = original(self).result
            assert isinstance(result, dict)
            return ActionResult({k: v for k, v in result.items() if v != {}})

        return describe

    # At the HTTP layer only: moto's own create_endpoint reads DataCaptureConfig from the stored config.
    for action in ("describe_model", "describe_endpoint_config", "describe_endpoint"):
        monkeypatch.setattr(SageMakerResponse, action, drop_empty(getattr(SageMakerResponse, action)))


class Recorded(NamedTuple):
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


def event_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message (the framing of a streamed SageMaker answer): prelude with its
    CRC32, string headers, payload, message CRC32. botocore's own decoder reads it on the client."""
    encoded = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        encoded += (
            struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", 7, len(raw_value)) + raw_value
        )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    message = prelude + struct.pack("!I", binascii.crc32(prelude)) + encoded + payload
    return message + struct.pack("!I", binascii.crc32(message))


def payload_part(part: bytes) -> bytes:
    headers = {
        ":message-type": "event",
        ":event-type": "PayloadPart",
        ":content-type": "application/octet-stream",
    }
    return event_message(headers, part)


class RecordingMotoServer:
    """moto's threaded server behind a thin WSGI layer that keeps every request it receives (method,
    path, headers, body), so a test can check what the code SENT, not only what moto's canned answer
    was. Same app and request handler as moto's ThreadedMotoServer.

    moto 5.2.5 has no InvokeEndpointWithResponseStream: for an endpoint named in `streams` the layer
    answers it itself, each given byte part one PayloadPart event, as SageMaker cuts a container's body.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.requests: list[Recorded] = []
        self.streams: dict[str, list[bytes]] = {}
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def _app(self, inner: Any) -> Callable[..., Any]:
        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length) if length else b""
            environ["wsgi.input"] = io.BytesIO(body)
            headers = {
                k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items() if k.startswith("HTTP_")
            }
            if environ.get("CONTENT_TYPE"):
                headers["content-type"] = str(environ["CONTENT_TYPE"])
            path = str(environ.get("PATH_INFO", ""))
            with self._lock:
                self.requests.append(Recorded(environ["REQUEST_METHOD"], path, headers, body))
            name = path.removeprefix("/endpoints/").removesuffix("/invocations-response-stream")
            if path.endswith("/invocations-response-stream") and name in self.streams:
                out = b"".join(payload_part(part) for part in self.streams[name])
                start_response(
                    "200 OK",
                    [
                        ("Content-Type", "application/vnd.amazon.eventstream"),
                        ("X-Amzn-SageMaker-Content-Type", "text/event-stream"),
                        ("Content-Length", str(len(out))),
                    ],
                )
                return [out]
            return inner(environ, start_response)

        return app

    def start(self) -> str:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        app = self._app(DomainDispatcherApplication(create_backend_app))
        self._server = make_server("127.0.0.1", self.port, app, True, request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
        if self._thread is not None:
            self._thread.join(10)

    def sent(self, method: str, path: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.method == method and r.path == path]
