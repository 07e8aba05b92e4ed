"""A real S3-compatible server (moto) on 127.0.0.1 for the whole session, seen through a thin WSGI layer.

Shared by the s3 tier and the integration tier (a server staging its model from S3); the fixtures are
registered in tests/conftest.py so one moto server serves the whole test session.

The layer only observes and perturbs at the HTTP level, like a real network would: it counts every
request the server receives (so tests count GETs server-side), can hold a key's GET open (to kill a
download midway), and can answer for a bucket the way AWS does for cases moto does not model
(403 AccessDenied for a role without permission, 301 PermanentRedirect for a bucket in another region).
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class ServerControl:
    endpoint: str = ""
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, query)
    deny: set[str] = field(default_factory=set)
    redirect: dict[str, str] = field(default_factory=dict)  # bucket -> its region
    hold: dict[str, threading.Event] = field(default_factory=dict)  # "/bucket/key" -> released when set
    faults: dict[str, list[str]] = field(default_factory=dict)  # "/bucket/key" -> GET faults, in order
    # "METHOD /bucket/key-prefix" -> released when set: holds any matching request (e.g. an upload's PUTs)
    hold_prefix: dict[str, threading.Event] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def object_gets(self, bucket: str) -> dict[str, int]:
        """GET requests on object keys of `bucket` (listings excluded), by key."""
        out: dict[str, int] = {}
        with self.lock:
            for method, path, _query in self.requests:
                parts = path.lstrip("/").split("/", 1)
                if method == "GET" and parts[0] == bucket and len(parts) == 2 and parts[1]:
                    out[parts[1]] = out.get(parts[1], 0) + 1
        return out

    def client(self, service: str = "s3") -> Any:
        """A boto3 client of `service` on this server, with the test credentials."""
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            aws_access_key_id="testing-key-id",
            aws_secret_access_key="testing-secret-value",
            region_name="us-east-1",
        )

    def all_requests(self, bucket: str) -> list[tuple[str, str, str]]:
        with self.lock:
            return [r for r in self.requests if r[1].lstrip("/").split("/", 1)[0] == bucket]


def _error(
    start_response: Callable[..., Any], status: str, code: str, extra: list[tuple[str, str]]
) -> list[bytes]:
    body = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>{code}</Message></Error>".encode()
    start_response(status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body))), *extra])
    return [body]


class _Layer:
    def __init__(self, app: Any, ctl: ServerControl) -> None:
        self.app, self.ctl = app, ctl

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        method, path, query = (
            environ["REQUEST_METHOD"],
            environ.get("PATH_INFO", ""),
            environ.get("QUERY_STRING", ""),
        )
        with self.ctl.lock:
            self.ctl.requests.append((method, path, query))
        bucket = path.lstrip("/").split("/", 1)[0]
        if bucket in self.ctl.deny:
            return _error(start_response, "403 Forbidden", "AccessDenied", [])
        if bucket in self.ctl.redirect:
            region = self.ctl.redirect[bucket]
            return _error(
                start_response,
                "301 Moved Permanently",
                "PermanentRedirect",
                [("x-amz-bucket-region", region)],
            )
        held = self.ctl.hold.get(path)
        if held is not None and method == "GET":
            held.wait(60)
        for prefix, event in list(self.ctl.hold_prefix.items()):
            if f"{method} {path}".startswith(prefix):
                event.wait(60)
        fault = None
        with self.ctl.lock:
            pending = self.ctl.faults.get(path)
            if pending and method == "GET":
                fault = pending.pop(0)
        if fault == "slowdown":  # S3's throttling answer
            return _error(start_response, "503 Slow Down", "SlowDown", [])
        if fault == "drop":  # send the headers and part of the body, then drop the connection
            return _dropping(self.app(environ, start_response))
        return self.app(environ, start_response)


def _dropping(body: Any) -> Iterator[bytes]:
    sent = 0
    for chunk in body:
        half = chunk[: max(1, len(chunk) // 2)]
        sent += len(half)
        yield half
        break
    raise ConnectionResetError(f"test server dropped the connection after {sent} bytes")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_server() -> Iterator[ServerControl]:
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    ctl = ServerControl()
    port = _free_port()

    class Server(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = _Layer(DomainDispatcherApplication(create_backend_app), ctl)
            self._server = make_server("127.0.0.1", port, app, threaded=True)
            self._server_ready_event.set()
            self._server.serve_forever()

    server = Server(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    ctl.endpoint = f"http://127.0.0.1:{port}"
    try:
        yield ctl
    finally:
        for ev in [*ctl.hold.values(), *ctl.hold_prefix.values()]:
            ev.set()
        server.stop()


@pytest.fixture
def s3_env(s3_server: ServerControl) -> dict[str, str]:
    """The environment mapping stage_all gets: only the standard AWS variables."""
    return {
        "AWS_ENDPOINT_URL_S3": s3_server.endpoint,
        "AWS_ACCESS_KEY_ID": "testing-key-id",
        "AWS_SECRET_ACCESS_KEY": "testing-secret-value",
        "AWS_REGION": "us-east-1",
        "NEURONSERVE_S3_CONCURRENCY": "8",
        "NEURONSERVE_S3_PART_MB": "1",
    }


@pytest.fixture
def s3(s3_server: ServerControl, s3_env: dict[str, str]) -> Any:
    return s3_server.client()


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"ns-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=name)
    return name


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
