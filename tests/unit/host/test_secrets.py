"""HF_TOKEN_SECRET_ARN: the secret's shapes, the ARN check, and each refusal of Secrets Manager as a
one-line ConfigError naming the fix. AWS answers come from a real HTTP server on 127.0.0.1: moto for the
secrets themselves, a small JSON server for the refusals moto does not model (IAM, KMS)."""

from __future__ import annotations

import ast
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from neuronserve.errors import ConfigError
from neuronserve.host.secrets import check_arn, token_from, with_secrets

ROOT = Path(__file__).resolve().parents[3]
ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-token-AbCdEf"
TOKEN = "hf_testtokenvalue0123456789"


def test_no_arn_leaves_the_environment_alone() -> None:
    env = {"HF_TOKEN": TOKEN, "PATH": "/bin"}
    assert with_secrets(env) == env


@pytest.mark.parametrize(
    ("secret", "token"),
    [(TOKEN, TOKEN), (f"  {TOKEN}\n", TOKEN), (json.dumps({"HF_TOKEN": TOKEN, "other": "x"}), TOKEN)],
)
def test_the_secret_is_the_token_or_a_json_object_holding_it(secret: str, token: str) -> None:
    assert token_from(secret, ARN) == token


@pytest.mark.parametrize(
    "secret", ["", "   ", json.dumps({"token": TOKEN}), "{not json", json.dumps({"HF_TOKEN": 1})]
)
def test_unusable_secrets_are_refused_without_echoing_them(secret: str) -> None:
    with pytest.raises(ConfigError, match="HF_TOKEN_SECRET_ARN") as err:
        token_from(secret, ARN)
    assert TOKEN not in str(err.value)


@pytest.mark.parametrize(
    "arn",
    [
        "hf-token",
        "arn:aws:ssm:us-east-1:123456789012:parameter/hf",
        "arn:aws:secretsmanager:us-east-1:1234:secret:x",
        TOKEN,
    ],
)
def test_arn_shape_is_checked(arn: str) -> None:
    with pytest.raises(ConfigError, match="not a Secrets Manager secret ARN"):
        with_secrets({"HF_TOKEN_SECRET_ARN": arn})


def test_arn_region_and_partitions() -> None:
    assert check_arn(ARN) == "us-east-1"
    assert check_arn("arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:t-1") == "us-gov-west-1"


def test_token_and_arn_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="both HF_TOKEN and HF_TOKEN_SECRET_ARN") as err:
        with_secrets({"HF_TOKEN_SECRET_ARN": ARN, "HF_TOKEN": TOKEN})
    assert TOKEN not in str(err.value)


class _Refusing(BaseHTTPRequestHandler):
    """Secrets Manager's JSON protocol answering every GetSecretValue with one error type."""

    error_type = "AccessDeniedException"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"__type": self.error_type, "message": "refused by the test server"}).encode()
        self.send_response(400)
        self.send_header("content-type", "application/x-amz-json-1.1")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def refusing() -> Iterator[tuple[str, type[_Refusing]]]:
    handler = type("Handler", (_Refusing,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("error", "needle"),
    [
        ("AccessDeniedException", "needs secretsmanager:GetSecretValue on " + ARN),
        ("ResourceNotFoundException", "no secret " + ARN),
        ("DecryptionFailure", "kms:Decrypt"),
        ("InvalidRequestException", "scheduled for deletion"),
        ("InternalServiceError", "InternalServiceError"),
    ],
)
def test_refusals_name_the_fix(refusing: tuple[str, type[_Refusing]], error: str, needle: str) -> None:
    endpoint, handler = refusing
    handler.error_type = error
    env = {
        "HF_TOKEN_SECRET_ARN": ARN,
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": endpoint,
        "AWS_ACCESS_KEY_ID": "testing-key-id",
        "AWS_SECRET_ACCESS_KEY": "testing-secret-value",
    }
    with pytest.raises(ConfigError) as err:
        with_secrets(env)
    assert needle in str(err.value) and err.value.variables == ("HF_TOKEN_SECRET_ARN",)


def test_an_unreachable_endpoint_names_the_network() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        "HF_TOKEN_SECRET_ARN": ARN,
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing-key-id",
        "AWS_SECRET_ACCESS_KEY": "testing-secret-value",
    }
    with pytest.raises(ConfigError, match="cannot reach Secrets Manager in us-east-1"):
        with_secrets(env)


def test_moto_secret_becomes_hf_token(s3_server: Any) -> None:
    """The whole path against a real moto server: a string secret and a JSON one, by ARN."""
    client = s3_server.client("secretsmanager")
    # names of this test's own: the moto server is shared with other tests that create secrets
    plain = client.create_secret(Name="unit-hf-plain", SecretString=TOKEN)["ARN"]
    token_json = json.dumps({"HF_TOKEN": TOKEN + "j"})
    as_json = client.create_secret(Name="unit-hf-json", SecretString=token_json)["ARN"]
    base = {
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": s3_server.endpoint,
        "AWS_ACCESS_KEY_ID": "testing-key-id",
        "AWS_SECRET_ACCESS_KEY": "testing-secret-value",
        "PATH": "/bin",
    }
    assert with_secrets({**base, "HF_TOKEN_SECRET_ARN": plain})["HF_TOKEN"] == TOKEN
    assert with_secrets({**base, "HF_TOKEN_SECRET_ARN": as_json})["HF_TOKEN"] == TOKEN + "j"
    missing = plain.rsplit(":", 1)[0] + ":no-such-secret-XyZ123"
    with pytest.raises(ConfigError, match="no secret " + missing):
        with_secrets({**base, "HF_TOKEN_SECRET_ARN": missing})


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("AWS_ACCESS_KEY_ID", True),
        ("SM_VLLM_API_KEY", True),
        ("DB_PASSWORD_FILE", True),
        ("MY_SECRET", True),
        ("HF_TOKEN_SECRET_ARN", False),  # a reference: shown, so a dry run says which secret is used
        ("SM_VLLM_MAX_NUM_BATCHED_TOKENS", False),
        ("SM_NEURON_TOKEN_GENERATION_BUCKETS", False),
    ],
)
def test_one_rule_names_the_secrets(name: str, secret: bool) -> None:
    from neuronserve.redact import is_secret_name

    assert is_secret_name(name) is secret


def test_the_design_map_names_every_command_that_reads_the_secret() -> None:
    """docs/DESIGN.md's host/secrets.py line names exactly the commands that call with_secrets (read from
    their syntax trees). The bug: it said `serve` only after `stage` and `compile` read it too."""
    callers = set()
    for path in sorted((ROOT / "src" / "neuronserve" / "commands").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        if "with_secrets" in names:
            callers.add(path.stem)
    line = next(x for x in (ROOT / "docs" / "DESIGN.md").read_text().splitlines() if "secrets.py" in x)
    assert callers and set(re.findall(r"`(\w+)`", line)) == callers, (line, callers)
