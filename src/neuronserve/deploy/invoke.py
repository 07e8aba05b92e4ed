"""Call an endpoint with boto3's sagemaker-runtime: plain, or streaming with line reassembly.

boto3 directly, not sagemaker-core: Endpoint.invoke_with_response_stream in sagemaker-core 2.27 is broken.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from neuronserve.deploy.stream import events, lines_from_parts, payload_parts, text_of

# SageMaker answers /invocations within 60 s; leave it the margin clients usually use.
READ_TIMEOUT_S = 70


def runtime_client(session: Any = None, region: str | None = None) -> Any:
    import boto3
    from botocore.config import Config

    session = session or boto3.Session()
    config = Config(read_timeout=READ_TIMEOUT_S, retries={"max_attempts": 2, "mode": "standard"})
    return session.client("sagemaker-runtime", region_name=region, config=config)


def invoke(client: Any, endpoint: str, body: dict[str, Any], custom_attributes: str | None = None) -> Any:
    kwargs: dict[str, Any] = {
        "EndpointName": endpoint,
        "ContentType": "application/json",
        "Accept": "application/json",
        "Body": json.dumps(body).encode(),
    }
    if custom_attributes:
        kwargs["CustomAttributes"] = custom_attributes
    response = client.invoke_endpoint(**kwargs)
    raw = response["Body"].read()
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def invoke_stream(client: Any, endpoint: str, body: dict[str, Any]) -> Iterator[str]:
    """Yields the text of each streamed token/chunk, reassembled across PayloadPart boundaries."""
    response = client.invoke_endpoint_with_response_stream(
        EndpointName=endpoint,
        ContentType="application/json",
        Accept="text/event-stream",
        Body=json.dumps({**body, "stream": True}).encode(),
    )
    for event in events(lines_from_parts(payload_parts(response["Body"]))):
        yield text_of(event)
