"""The access line cannot be forged, through the REAL server (`neuronserve serve` before the stand-in
engine), in both log formats: raw requests carry `key=value` text, quotes, backslashes and bytes
outside ASCII in their paths; each request's access line, read by a `key=value` parser (and by the
regex search a log query does), holds the real fields with the real values and nothing else."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.support.standin_server import StandinServer, standin_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

FIELDS = ["status", "latency_ms", "tokens_in", "tokens_out", "request_id"]
FORGING_PATHS = [
    b"/x%20status=200%20request_id=FORGED",  # the example
    b"/x status=200",  # a raw space ends the request target: the parser refuses the request (400)
    b'/x"%20status=200%20request_id="FORGED',
    b"/x\\%20status=200",
    b"/v1/models=1%20tokens_in=999",
    b"/\xe9t\xe9%20request_id=FORGED",
    b"/x%0Astatus=200",
    b"/invocations;status=200",
]


@pytest.fixture(scope="module", params=["text", "json"])
def front(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandinServer]:
    tmp = tmp_path_factory.mktemp(f"access-{request.param}")
    with standin_server(tmp, NEURONSERVE_LOG_FORMAT=request.param) as server:
        yield server


def _raw_request(server: StandinServer, target: bytes, rid: str) -> int:
    """One GET written byte for byte; the status the server answered."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            b"GET " + target + b" HTTP/1.1\r\nHost: t\r\nX-Request-Id: " + rid.encode() + b"\r\n\r\n"
        )
        data = b""
        while b"\r\n\r\n" not in data and (chunk := sock.recv(65536)):
            data += chunk
    return int(data.split(b" ", 2)[1])


def _kv(line: str) -> list[tuple[str, str]]:
    """A `key=value` parser: whitespace-separated tokens, each split at its first `=`."""
    return [tuple(tok.split("=", 1)) for tok in line.split() if "=" in tok]  # type: ignore[misc]


def _access(server: StandinServer, rid: str) -> dict[str, Any]:
    """The access record of request `rid`: the text line's message, or the JSON object."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in server.log().splitlines():
            if "neuronserve.access" not in line or rid not in line:
                continue
            if line.startswith("{"):
                doc: dict[str, Any] = json.loads(line)
                return doc
            return {"message": line.split("neuronserve.access: ", 1)[1]}
        time.sleep(0.1)
    raise AssertionError(f"no access line for {rid}")


@pytest.mark.parametrize("target", FORGING_PATHS, ids=range(len(FORGING_PATHS)))
def test_a_path_cannot_forge_access_log_fields(front: StandinServer, target: bytes) -> None:
    rid = f"real-{time.monotonic_ns()}"
    status = _raw_request(front, target, rid)
    if status == 400:  # refused by the HTTP parser before any route: no access line to forge
        assert not any(rid in line for line in front.log().splitlines() if "neuronserve.access" in line)
        return
    record = _access(front, rid)
    message = record["message"]
    pairs = _kv(message)
    assert [k for k, _ in pairs] == FIELDS, message  # the real fields, once each, in order
    values = dict(pairs)
    assert values["status"] == str(status) and values["request_id"] == rid, message
    # what a log query does: the first `status=` / `request_id=` anywhere in the line is the real one
    assert re.search(r"status=(\S+)", message).group(1) == str(status)  # type: ignore[union-attr]
    assert re.search(r"request_id=(\S+)", message).group(1) == rid  # type: ignore[union-attr]
    assert message.startswith("GET /") and len(message.splitlines()) == 1
    if "status" in record:  # the JSON format's own fields are the real ones too
        assert (record["status"], record["request_id"], record["method"]) == (status, rid, "GET")
        assert record["route"] == "other"


def test_an_allowed_route_is_logged_as_it_is(front: StandinServer) -> None:
    rid = f"plain-{time.monotonic_ns()}"
    assert _raw_request(front, b"/v1/models", rid) == 200
    message = _access(front, rid)["message"]
    assert message.startswith("GET /v1/models status=200 latency_ms=") and message.endswith(
        f"request_id={rid}"
    )
