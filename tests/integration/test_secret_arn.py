"""The real `neuronserve serve` reads HF_TOKEN from Secrets Manager (a moto server on 127.0.0.1) before
its plan: the engine's environment holds the token, and no line the server writes does.

The engine is the stand-in executable (tests/support/standin_engine): no vLLM starts, so this needs no
engine lock. The engine's environment is read from /proc, as the kernel gave it to the process.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.support.server import free_port
from tests.support.standin_server import standin_env

pytestmark = pytest.mark.integration

TOKEN = "hf_integrationtoken0123456789abcdef"
PID = re.compile(r"replica 0 started: pid (\d+)")


def _env(tmp: Path, endpoint: str, arn: str) -> dict[str, str]:
    return standin_env(
        tmp,
        free_port(),
        drop=("HF_", "AWS_"),
        STANDIN_EVENTS=str(tmp / "events.jsonl"),
        STANDIN_WRITE_S="0.01",
        HF_HUB_OFFLINE="1",
        HF_TOKEN_SECRET_ARN=arn,
        AWS_ENDPOINT_URL_SECRETS_MANAGER=endpoint,
        AWS_ACCESS_KEY_ID="testing-key-id",
        AWS_SECRET_ACCESS_KEY="testing-secret-value",
    )


def _engine_environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").partition("=")[::2] for item in raw if item)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_serve_resolves_the_token_and_never_logs_it(tmp_path: Path, s3_server: Any, log_format: str) -> None:
    client = s3_server.client("secretsmanager")
    secret = json.dumps({"HF_TOKEN": TOKEN})  # named apart: the moto server is shared between tests
    arn = client.create_secret(Name=f"integration-hf-{log_format}", SecretString=secret)["ARN"]
    env = _env(tmp_path, s3_server.endpoint, arn)
    env["NEURONSERVE_LOG_FORMAT"] = log_format
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "neuronserve", "serve", "--device", "neuron"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(tmp_path),
        )
    url = f"http://127.0.0.1:{env['SAGEMAKER_BIND_TO_PORT']}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(f"{url}/ping", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        else:
            raise AssertionError(log.read_text()[-3000:])
        m = PID.search(log.read_text())
        assert m, log.read_text()[-3000:]
        engine_env = _engine_environ(int(m.group(1)))
        assert engine_env.get("HF_TOKEN") == TOKEN  # the engine inherited the resolved token
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    text = log.read_text()
    assert arn in text  # where the token came from is logged...
    assert TOKEN not in text  # ...the token never is


def test_serve_refuses_a_missing_secret_in_one_line(tmp_path: Path, s3_server: Any) -> None:
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:no-such-secret-AbCdEf"
    env = _env(tmp_path, s3_server.endpoint, arn)
    out = subprocess.run(
        [sys.executable, "-m", "neuronserve", "serve", "--device", "neuron"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(tmp_path),
    )
    assert out.returncode == 2, out.stderr
    assert f"no secret {arn}" in out.stderr and "Traceback" not in out.stderr
