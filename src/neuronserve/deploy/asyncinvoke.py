"""Asynchronous inference: for generations longer than InvokeEndpoint's 60 s.

The endpoint must be deployed with `--async-output s3://...` (an `AsyncInferenceConfig`). A request
is a JSON body put at an S3 input location; `InvokeEndpointAsync` queues it and answers at once with
the `OutputLocation` (and `FailureLocation`) where SageMaker will write the container's answer
(botocore sagemaker-runtime/2017-05-13/service-2.json, `InvokeEndpointAsyncInput`: InputLocation,
InvocationTimeoutSeconds 1-3600; output: OutputLocation, FailureLocation). The container sees an
ordinary POST /invocations, so nothing changes in neuronserve itself.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from neuronserve.deploy.errors import DeployError
from neuronserve.errors import ConfigError

INVOCATION_TIMEOUT_S = 3600
POLL_S = 5.0


def split_s3(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ConfigError(f"{uri}: expected s3://bucket/key")
    bucket, _, key = uri[5:].partition("/")
    if not bucket:
        raise ConfigError(f"{uri}: expected s3://bucket/key")
    return bucket, key


def submit(
    runtime: Any,
    s3: Any,
    endpoint: str,
    body: dict[str, Any],
    input_prefix: str,
    *,
    timeout_s: int = INVOCATION_TIMEOUT_S,
) -> dict[str, str]:
    """Put the body under `input_prefix` (s3://bucket/prefix/) and queue it; returns the locations."""
    if not 1 <= timeout_s <= 3600:
        raise ConfigError(f"--timeout {timeout_s}: InvokeEndpointAsync accepts 1 to 3600 seconds")
    bucket, prefix = split_s3(input_prefix)
    key = f"{prefix.rstrip('/')}/{uuid.uuid4().hex}.json".lstrip("/")
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(body).encode(), ContentType="application/json")
    answer = runtime.invoke_endpoint_async(
        EndpointName=endpoint,
        InputLocation=f"s3://{bucket}/{key}",
        ContentType="application/json",
        Accept="application/json",
        InvocationTimeoutSeconds=timeout_s,
    )
    out = {"InputLocation": f"s3://{bucket}/{key}", "OutputLocation": answer["OutputLocation"]}
    if answer.get("FailureLocation"):
        out["FailureLocation"] = answer["FailureLocation"]
    if answer.get("InferenceId"):
        out["InferenceId"] = answer["InferenceId"]
    return out


def _read(s3: Any, uri: str) -> bytes | None:
    from botocore.exceptions import ClientError

    bucket, key = split_s3(uri)
    try:
        return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise


def result(s3: Any, locations: dict[str, str], poll_s: float = POLL_S, timeout_s: float = 3900) -> Any:
    """Wait for the answer at OutputLocation (JSON if it parses); an object at FailureLocation raises."""
    deadline = time.monotonic() + timeout_s
    while True:
        failure = locations.get("FailureLocation")
        if failure and (raw := _read(s3, failure)) is not None:
            raise DeployError(f"async inference failed ({failure}): {raw.decode(errors='replace')[:500]}")
        raw = _read(s3, locations["OutputLocation"])
        if raw is not None:
            try:
                return json.loads(raw)
            except ValueError:
                return raw.decode(errors="replace")
        if time.monotonic() >= deadline:
            raise DeployError(f"no async answer at {locations['OutputLocation']} after {timeout_s:.0f} s")
        time.sleep(poll_s)
