"""Every object `neuronserve deploy k8s` renders validates offline: the Kubernetes ones strictly against
the OpenAPI schemas of Kubernetes 1.31 to 1.34 (kubernetes-validate), the ScaledObject against KEDA
2.20.2's CRD, and the validators catch a broken object (they can fail)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from k8s_support import CACHE, rendered, validate_kubernetes, validate_scaled_object

from neuronserve.deploy.k8s.options import SecretRef
from neuronserve.deploy.k8s.render import Rendered

ARN = "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf-token-AbCdEf"
RENDERS = {
    "inf2-xlarge-plain": rendered,
    "inf2-48xlarge-keda-irsa": lambda: rendered(
        {**CACHE, "SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "NEURONSERVE_DATA_PARALLEL": "2"},
        "inf2.48xlarge",
        autoscaler="keda",
        role_arn="arn:aws:iam::123456789012:role/neuronserve",
        token_arn=ARN,
    ),
    "trn1-32xlarge-hpa-devices": lambda: rendered(
        {**CACHE, "SM_VLLM_TENSOR_PARALLEL_SIZE": "16"},
        "trn1.32xlarge",
        autoscaler="hpa",
        neuron_resource="device",
    ),
    "trn2-48xlarge-secret-ref": lambda: rendered(
        {"SM_VLLM_TENSOR_PARALLEL_SIZE": "32"},
        "ml.trn2.48xlarge",
        namespace="serving",
        secret_refs={"HF_TOKEN": SecretRef("hf-token", "token")},
        replicas=2,
    ),
}


def documents(name: str) -> list[dict[str, Any]]:
    result: Rendered = RENDERS[name]()
    return result.documents()


@pytest.mark.parametrize("name", sorted(RENDERS))
def test_every_object_validates(name: str) -> None:
    docs = documents(name)
    kinds = {d["kind"] for d in docs}
    assert {"ServiceAccount", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"} <= kinds
    for doc in docs:
        if doc["kind"] == "ScaledObject":
            validate_scaled_object(doc)
        else:
            validate_kubernetes(doc)


def test_the_kubernetes_validator_can_fail() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate")
    deployment = next(d for d in documents("inf2-xlarge-plain") if d["kind"] == "Deployment")
    for mutate in (
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(
            {"livenesProbe": {}}
        ),  # a typo'd field
        lambda d: d["spec"].update({"replicas": "one"}),
        lambda d: d["spec"]["template"]["spec"]["containers"][0]["startupProbe"].update(
            {"failureThreshold": "x"}
        ),
    ):
        broken = copy.deepcopy(deployment)
        mutate(broken)
        with pytest.raises(kubernetes_validate.ValidationError):
            validate_kubernetes(broken)


def test_the_keda_validator_can_fail() -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="needs jsonschema")
    scaled = next(d for d in documents("inf2-48xlarge-keda-irsa") if d["kind"] == "ScaledObject")
    for mutate in (
        lambda d: d["spec"].pop("triggers"),
        lambda d: d["spec"].pop("scaleTargetRef"),
        lambda d: d["spec"]["triggers"][0]["metadata"].update({"threshold": 8}),  # metadata values are text
        lambda d: d["spec"].update({"minReplicaCount": "1"}),
    ):
        broken = copy.deepcopy(scaled)
        mutate(broken)
        with pytest.raises(jsonschema.ValidationError):
            validate_scaled_object(broken)
