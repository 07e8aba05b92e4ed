"""Mid-stream failures through the real boto3 client and botocore's event-stream parser.

SageMaker reports a failure after the 200 as an exception event in the stream. boto3 raises it as
`botocore.exceptions.EventStreamError` while the Body is iterated (it never appears as an event dict),
so the client must map that exception: a user sees one line naming the error, not a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from eventstream_bytes import exception, payload_part, runtime_server

pytest.importorskip("botocore")

CHUNKS = [
    b'data: {"choices":[{"delta":{"content":"Par"}}]}\n',
    b'\ndata: {"choices":[{"delta":{"content":"is"}}]}\n\n',
]


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def client(url: str):  # type: ignore[no-untyped-def]
    import boto3

    return boto3.Session().client("sagemaker-runtime", region_name="us-east-1", endpoint_url=url)


def test_the_bytes_decode_with_botocores_parser() -> None:
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    buffer.add_data(
        payload_part(b"abc") + exception("ModelStreamError", {"Message": "m", "ErrorCode": "424"})
    )
    kinds = [m.headers.get(":event-type") or m.headers[":exception-type"] for m in buffer]
    assert kinds == ["PayloadPart", "ModelStreamError"]


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        ("ModelStreamError", {"Message": "engine died: CUDA out of nothing", "ErrorCode": "ModelError"}),
        ("InternalStreamFailure", {"Message": "stream interrupted"}),
    ],
)
def test_exception_event_becomes_a_stream_error(fake_aws: None, kind: str, fields: dict[str, str]) -> None:
    from neuronserve.deploy.invoke import invoke_stream
    from neuronserve.deploy.stream import StreamError

    stream = b"".join(payload_part(c) for c in CHUNKS) + exception(kind, fields)
    with runtime_server(stream) as (url, received):
        texts: list[str] = []
        with pytest.raises(StreamError) as err:
            for text in invoke_stream(client(url), "ep", {"messages": [{"role": "user", "content": "hi"}]}):
                texts.append(text)
    assert texts == ["Par", "is"], "the parts before the failure are delivered"
    assert str(err.value).startswith(f"{kind}: {fields['Message']}")
    assert json.loads(received[0]) == {"messages": [{"role": "user", "content": "hi"}], "stream": True}


def test_cli_prints_one_line_and_exits_1(
    fake_aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from neuronserve.deploy.cli import main

    stream = payload_part(CHUNKS[0]) + exception(
        "ModelStreamError", {"Message": "engine died", "ErrorCode": "E"}
    )
    with runtime_server(stream) as (url, _):
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        code = main("invoke", ["--region", "us-east-1", "--name", "ep", "--stream", "--prompt", "hi"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == "Par"
    assert err.strip().splitlines() == [
        "invoke: error: ModelStreamError: engine died (the endpoint failed mid-stream; its logs say why)"
    ]


def test_a_clean_stream_is_reassembled(fake_aws: None) -> None:
    from neuronserve.deploy.invoke import invoke_stream

    body = b"".join(CHUNKS) + b"data: [DONE]\n\n"
    parts: Iterator[bytes] = (body[i : i + 7] for i in range(0, len(body), 7))
    with runtime_server(b"".join(payload_part(p) for p in parts)) as (url, _):
        assert "".join(invoke_stream(client(url), "ep", {"prompt": "x"})) == "Paris"
