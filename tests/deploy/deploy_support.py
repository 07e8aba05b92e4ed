"""A real moto server on 127.0.0.1 for SageMaker, with the two patches moto 5.2.5 needs.

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


def use_moto(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """AWS clients of this test talk to the moto server at `url` with test credentials, no profile."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": url,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


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


class Lifecycle:
    """Endpoint life cycle that moto 5.2.5 lacks, as the SageMaker API reference describes it; applied
    with `patch_lifecycle` (test-scoped like the patches above):

    - CreateEndpoint on a name that still exists (even while Deleting) fails with ValidationException
      "Cannot create already existing endpoint" (moto replaces the old endpoint silently).
    - DeleteEndpoint returns at once; the endpoint stays `Deleting` for `delete_polls` DescribeEndpoint
      calls, then is gone (moto deletes it at once).
    - UpdateEndpoint (not implemented by moto): switches the endpoint to the new config, `Updating` for
      one DescribeEndpoint, then InService; `LastDeploymentConfig` is what the request sent.
    - `fail_next`: the next CreateEndpoint ends `Failed` with that FailureReason.
    """

    def __init__(self, delete_polls: int = 2) -> None:
        self.delete_polls = delete_polls
        self.fail_next: str | None = None
        self.countdown: dict[str, tuple[int, str | None]] = {}
        self.updates: list[dict[str, Any]] = []


def patch_lifecycle(monkeypatch: pytest.MonkeyPatch, life: Lifecycle) -> None:
    from moto.sagemaker import models
    from moto.sagemaker.exceptions import ValidationError
    from moto.sagemaker.responses import SageMakerResponse

    backend_cls = models.SageMakerModelBackend
    create, describe, delete = (
        backend_cls.create_endpoint,
        backend_cls.describe_endpoint,
        backend_cls.delete_endpoint,
    )

    def create_endpoint(self: Any, endpoint_name: str, endpoint_config_name: str, tags: Any) -> Any:
        if endpoint_name in self.endpoints:
            arn = models.FakeEndpoint.arn_formatter(endpoint_name, self.account_id, self.region_name)
            raise ValidationError(message=f'Cannot create already existing endpoint "{arn}".')
        endpoint = create(self, endpoint_name, endpoint_config_name, tags)
        if life.fail_next is not None:
            endpoint.endpoint_status, endpoint.failure_reason = "Failed", life.fail_next
            life.fail_next = None
        return endpoint

    def describe_endpoint(self: Any, endpoint_name: str) -> Any:
        if endpoint_name in life.countdown and endpoint_name in self.endpoints:
            left, then = life.countdown[endpoint_name]
            if left <= 0:
                del life.countdown[endpoint_name]
                if then is None:
                    del self.endpoints[endpoint_name]
                else:
                    self.endpoints[endpoint_name].endpoint_status = then
            else:
                life.countdown[endpoint_name] = (left - 1, then)
        return describe(self, endpoint_name)

    def delete_endpoint(self: Any, endpoint_name: str) -> None:
        if endpoint_name not in self.endpoints:
            delete(self, endpoint_name)  # moto's own "Could not find endpoint"
        self.endpoints[endpoint_name].endpoint_status = "Deleting"
        life.countdown[endpoint_name] = (life.delete_polls, None)

    def update_endpoint(self: Any) -> Any:
        from moto.core.responses import ActionResult

        backend = self.sagemaker_backend
        name, config_name = self._get_param("EndpointName"), self._get_param("EndpointConfigName")
        endpoint = backend.endpoints.get(name)
        if endpoint is None:
            describe(backend, name)  # raises "Could not find endpoint"
        if endpoint.endpoint_status != "InService":
            raise ValidationError(message=f"Cannot update in-progress endpoint {endpoint.arn}.")
        config = backend.describe_endpoint_config(config_name)  # raises if missing
        life.updates.append(dict(self._get_params()))
        endpoint.endpoint_config_name = config_name
        endpoint.production_variants = endpoint._process_production_variants(config["ProductionVariants"])
        endpoint.last_deployment_config = self._get_param("DeploymentConfig")
        endpoint.endpoint_status = "Updating"
        life.countdown[name] = (1, "InService")
        return ActionResult({"EndpointArn": endpoint.arn})

    monkeypatch.setattr(backend_cls, "create_endpoint", create_endpoint)
    monkeypatch.setattr(backend_cls, "describe_endpoint", describe_endpoint)
    monkeypatch.setattr(backend_cls, "delete_endpoint", delete_endpoint)
    monkeypatch.setattr(SageMakerResponse, "update_endpoint", update_endpoint, raising=False)
