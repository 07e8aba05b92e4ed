"""The driver note (deploy/driver.py) ends with a verdict every target can act on, and its SageMaker facts
are the ones botocore's service model documents (tests/deploy/test_spec.py checks the AMI's driver)."""

from __future__ import annotations

import pytest

from neuronserve.deploy.driver import IMAGE_RUNTIME_DRIVER, NEURON_AMI_DRIVER, note


def test_sagemaker_says_go_ahead_and_what_a_refusal_looks_like() -> None:
    text = note("sagemaker")
    assert f"driver {NEURON_AMI_DRIVER}" in text and IMAGE_RUNTIME_DRIVER in text
    assert "Verdict: go ahead" in text and "nothing to upgrade" in text
    assert "/aws/sagemaker/Endpoints/NAME" in text


@pytest.mark.parametrize(("target", "host"), [("ecs", "container instance"), ("eks", "node")])
def test_ecs_and_eks_say_which_driver_to_upgrade_to(target: str, host: str) -> None:
    text = note(target)  # type: ignore[arg-type]
    assert f"Verdict: fine on a {host} with driver {IMAGE_RUNTIME_DRIVER} or newer" in text
    assert "upgrade aws-neuronx-dkms first" in text and "modinfo -F version neuron" in text
