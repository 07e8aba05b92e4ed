"""What `invoke` really sends and what it prints, through the real boto3 client and HTTP.

The moto server records every request it receives: a prompt dropped or a body changed on the way fails
here, whatever moto's canned answer is. Streaming answers come back as real AWS event-stream framing
(PayloadPart events, cut mid-line and mid-character as SageMaker cuts them), decoded by botocore.
"""

from __future__ import annotations

import itertools
import json

import pytest
from deploy_support import RecordingMotoServer, use_moto
from test_stream import DATA, STREAMED_TEXT

pytestmark = pytest.mark.s3


@pytest.fixture
def aws(
    moto_server: RecordingMotoServer, moto_url: str, monkeypatch: pytest.MonkeyPatch
) -> RecordingMotoServer:
    use_moto(monkeypatch, moto_url)
    moto_server.requests.clear()
    moto_server.streams.clear()
    return moto_server


def run(*args: str) -> int:
    from neuronserve.deploy.cli import main

    return main("invoke", ["--region", "us-east-1", *args])


def test_invoke_sends_the_prompt(aws: RecordingMotoServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--name", "ep-plain", "--prompt", "the capital of France is") == 0
    capsys.readouterr()
    [sent] = aws.sent("POST", "/endpoints/ep-plain/invocations")
    assert json.loads(sent.body) == {
        "inputs": "the capital of France is",
        "parameters": {"max_new_tokens": 64},
    }
    assert sent.headers["content-type"] == "application/json"


def test_invoke_sends_a_given_body_and_custom_attributes(
    aws: RecordingMotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {"messages": [{"role": "user", "content": "caf\u00e9?"}], "max_tokens": 5}
    assert run("--name", "ep-body", "--body", json.dumps(body), "--custom-attributes", "session=abc") == 0
    capsys.readouterr()
    [sent] = aws.sent("POST", "/endpoints/ep-body/invocations")
    assert json.loads(sent.body) == body
    assert sent.headers["x-amzn-sagemaker-custom-attributes"] == "session=abc"


@pytest.mark.parametrize("name", sorted(STREAMED_TEXT))
def test_invoke_stream_sends_the_prompt_and_prints_the_whole_text(
    aws: RecordingMotoServer, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    recorded = (DATA / name).read_bytes()
    snowman = recorded.find("\ufffd".encode()) + 1  # inside a 3-byte character
    edges = sorted({0, 5, snowman, *range(64, len(recorded), 97), len(recorded)})
    aws.streams["ep-stream"] = [recorded[a:b] for a, b in itertools.pairwise(edges)]
    assert run("--name", "ep-stream", "--prompt", "hello there", "--stream") == 0
    assert capsys.readouterr().out == STREAMED_TEXT[name] + "\n"
    [sent] = aws.sent("POST", "/endpoints/ep-stream/invocations-response-stream")
    assert json.loads(sent.body) == {
        "inputs": "hello there",
        "parameters": {"max_new_tokens": 64},
        "stream": True,
    }
    assert sent.headers["x-amzn-sagemaker-accept"] == "text/event-stream"
