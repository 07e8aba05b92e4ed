"""Asynchronous inference (deploy/asyncinvoke.py) against a real moto server on 127.0.0.1: the body put
under the input prefix and queued, the answer read from OutputLocation (JSON or text) once it appears,
a FailureLocation object raised, and the wait bounded. The whole async deploy and invoke through the CLI
is test_endpoint.py's."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from deploy_support import free_port

from neuronserve.deploy import asyncinvoke
from neuronserve.deploy.errors import DeployError
from neuronserve.errors import ConfigError

BUCKET = "async-bucket"


@pytest.fixture(scope="module")
def clients() -> Iterator[tuple[Any, Any]]:
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    kw = {
        "region_name": "us-east-1",
        "endpoint_url": f"http://127.0.0.1:{port}",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    s3 = boto3.client("s3", **kw)
    s3.create_bucket(Bucket=BUCKET)
    try:
        yield s3, boto3.client("sagemaker-runtime", **kw)
    finally:
        server.stop()


def _keys(s3: Any, prefix: str) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]


@pytest.mark.parametrize(
    ("uri", "want"),
    [("s3://b/k/x.json", ("b", "k/x.json")), ("s3://b", ("b", "")), ("s3://b/", ("b", ""))],
)
def test_split_s3(uri: str, want: tuple[str, str]) -> None:
    assert asyncinvoke.split_s3(uri) == want


@pytest.mark.parametrize("uri", ["b/k", "https://b/k", "s3:///k", ""])
def test_split_s3_refuses_what_is_not_an_s3_uri(uri: str) -> None:
    with pytest.raises(ConfigError, match="expected s3://bucket/key"):
        asyncinvoke.split_s3(uri)


def test_submit_puts_the_body_under_the_prefix_and_queues_it(clients: tuple[Any, Any]) -> None:
    s3, runtime = clients
    body = {"inputs": "hello", "parameters": {"max_new_tokens": 4}}
    loc = asyncinvoke.submit(runtime, s3, "ep", body, f"s3://{BUCKET}/requests/")
    bucket, key = asyncinvoke.split_s3(loc["InputLocation"])
    assert bucket == BUCKET and key.startswith("requests/") and key.endswith(".json")
    sent = s3.get_object(Bucket=bucket, Key=key)
    assert json.loads(sent["Body"].read()) == body and sent["ContentType"] == "application/json"
    assert loc["OutputLocation"].startswith("s3://")


@pytest.mark.parametrize("timeout_s", [0, 3601])
def test_submit_refuses_a_timeout_outside_the_api_range_before_any_call(
    clients: tuple[Any, Any], timeout_s: int
) -> None:
    s3, runtime = clients
    with pytest.raises(ConfigError, match="1 to 3600 seconds"):
        asyncinvoke.submit(runtime, s3, "ep", {}, f"s3://{BUCKET}/refused/", timeout_s=timeout_s)
    assert _keys(s3, "refused/") == []


def test_result_waits_for_the_output_and_parses_json(clients: tuple[Any, Any]) -> None:
    s3, _ = clients
    loc = {
        "OutputLocation": f"s3://{BUCKET}/out/late.json",
        "FailureLocation": f"s3://{BUCKET}/out/late.fail",
    }
    later = threading.Timer(0.3, lambda: s3.put_object(Bucket=BUCKET, Key="out/late.json", Body=b'{"a": 1}'))
    later.start()
    try:
        assert asyncinvoke.result(s3, loc, poll_s=0.05, timeout_s=10) == {"a": 1}
    finally:
        later.cancel()


def test_result_returns_text_that_is_not_json(clients: tuple[Any, Any]) -> None:
    s3, _ = clients
    s3.put_object(Bucket=BUCKET, Key="out/text", Body=b"plain answer")
    assert (
        asyncinvoke.result(s3, {"OutputLocation": f"s3://{BUCKET}/out/text"}, poll_s=0.01) == "plain answer"
    )


def test_a_failure_object_is_raised_with_its_text(clients: tuple[Any, Any]) -> None:
    s3, _ = clients
    s3.put_object(Bucket=BUCKET, Key="out/f.fail", Body=b"model error: out of memory")
    loc = {"OutputLocation": f"s3://{BUCKET}/out/f.json", "FailureLocation": f"s3://{BUCKET}/out/f.fail"}
    with pytest.raises(
        DeployError, match=r"async inference failed \(s3://async-bucket/out/f.fail\): model error"
    ):
        asyncinvoke.result(s3, loc, poll_s=0.01, timeout_s=5)


def test_no_answer_in_time_names_the_output_location(clients: tuple[Any, Any]) -> None:
    s3, _ = clients
    loc = {"OutputLocation": f"s3://{BUCKET}/out/never.json"}
    with pytest.raises(DeployError, match=r"no async answer at s3://async-bucket/out/never.json after 0 s"):
        asyncinvoke.result(s3, loc, poll_s=0.01, timeout_s=0.2)
