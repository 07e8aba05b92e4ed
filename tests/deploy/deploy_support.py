"""A real moto server on 127.0.0.1 for SageMaker, with the two patches moto 5.2.5 needs (shared/SERVING.md).

1. moto's ProductionVariant instance-type list stops at ml.inf1.*: Neuron types inf2/trn1/trn2 are added.
2. moto answers describe calls with empty `VpcConfig: {}` / `DataCaptureConfig: {}`, which the
   sagemaker-core shapes reject: empty dicts are dropped from those responses.
Both are applied with pytest's monkeypatch, so they end with the test that asked for the server.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

NEURON_PREFIXES = ("ml.inf2.", "ml.trn1.", "ml.trn1n.", "ml.trn2.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def patch_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.sagemaker import models

    original_validate = models.FakeEndpointConfig.validate_instance_type

    def validate_instance_type(self: Any, instance_type: str) -> None:
        if instance_type.startswith(NEURON_PREFIXES):
            return
        original_validate(self, instance_type)

    monkeypatch.setattr(models.FakeEndpointConfig, "validate_instance_type", validate_instance_type)

    def drop_empty(original: Callable[..., Any]) -> Callable[..., Any]:
        def response_object(self: Any) -> Any:
            data = original.fget(self) if isinstance(original, property) else original(self)
            return {k: v for k, v in data.items() if v != {}}

        return property(response_object) if isinstance(original, property) else response_object

    for cls in (models.Model, models.FakeEndpointConfig, models.FakeEndpoint):
        monkeypatch.setattr(cls, "response_object", drop_empty(cls.__dict__["response_object"]))
