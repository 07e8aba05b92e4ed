"""A real moto server on 127.0.0.1 for SageMaker, with the two patches moto 5.2.5 needs (shared/SERVING.md).

1. moto's ProductionVariant instance-type list stops at ml.inf1.*: Neuron types inf2/trn1/trn2 are added.
2. moto answers describe calls with empty `VpcConfig: {}` / `DataCaptureConfig: {}`, which the
   sagemaker-core shapes reject: empty dicts are dropped from those HTTP responses.
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

    from moto.core.responses import ActionResult
    from moto.sagemaker.responses import SageMakerResponse

    def drop_empty(original: Callable[[Any], ActionResult]) -> Callable[[Any], ActionResult]:
        def describe(self: Any) -> ActionResult:
            result = original(self).result
            assert isinstance(result, dict)
            return ActionResult({k: v for k, v in result.items() if v != {}})

        return describe

    # At the HTTP layer only: moto's own create_endpoint reads DataCaptureConfig from the stored config.
    for action in ("describe_model", "describe_endpoint_config", "describe_endpoint"):
        monkeypatch.setattr(SageMakerResponse, action, drop_empty(getattr(SageMakerResponse, action)))
