"""The checks of a SageMaker deployment before any AWS call (deploy/speccheck.py), each naming its flag,
and the container's own plan they end with (deploy/validate.py)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from deploy_specs import FULL, spec

from neuronserve.deploy.speccheck import validate
from neuronserve.deploy.validate import cores_used, tensor_parallel
from neuronserve.errors import ConfigError


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"model_data_s3": "s3://bucket/model.tar.gz"}, "ending with '/'"),
        ({"model_data_s3": None, "env": {}}, "no model"),
        ({"startup_timeout_s": 7200}, "60 to 3600"),
        ({"volume_gb": 1000}, "1 to 512"),
        (
            {"env": {"SM_VLLM_TENSOR_PARALLEL_SIZE": "4", "SM_VLLM_MAX_MODEL_LEN": "2048"}},
            "has 2 NeuronCores",
        ),
    ],
)
def test_validate_refuses_before_any_call(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate(spec(**kw))


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"model_data_s3": None, "env": {"HF_MODEL_ID": "x/y"}}, "cannot reach the Hugging Face Hub"),
        (
            {"env": {"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "NEURONSERVE_CACHE_URI": "s3://b/c/"}},
            "cannot reach S3",
        ),
        ({"security_groups": ()}, "1 to 16 subnets and 1 to 5 security groups"),
        ({"async_output_s3": None}, "--async-failure needs --async-output"),
        ({"async_output_s3": "http://bucket/out"}, "--async-output"),
        ({"async_max_concurrent": 0}, "1 to 1000"),
        ({"tags": {"aws:x": "1"}}, "--tag aws:x=1"),
        ({"name": "a" * 48}, "at most 47 characters"),
        ({"name": "-bad"}, "--name"),
        ({"instance_type": "ml.trn1.32xlarge"}, "--kms-key"),
    ],
)
def test_option_refusals_name_the_flag(change: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(needle)):
        validate(replace(FULL, **change))  # type: ignore[arg-type]


def test_validate_returns_the_containers_plan() -> None:
    checked = validate(FULL)
    assert checked.instance == "ml.inf2.48xlarge" and checked.visible_cores == 24
    assert tensor_parallel(checked.plan) == 8 and cores_used(checked.plan) == 8
    assert checked.plan.model.source == "sagemaker"  # --model-data lands in /opt/ml/model


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"instance_type": "ml.g5.xlarge"}, "not a Neuron instance type"),
        (
            {"env": {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "SM_VLLM_ENABLE_PREFIX_CACHING": "yes"}},
            "is a switch",
        ),
        ({"model_data_s3": "s3://my-bucket/models/tiny/"}, "--model-data: s3://my-bucket/ is a placeholder"),
        (
            {"env": {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "NEURONSERVE_CACHE_URI": "s3://example/c/"}},
            "NEURONSERVE_CACHE_URI: s3://example/ is a placeholder",
        ),
    ],
)
def test_the_plan_and_the_placeholders_refuse_before_any_call(kw: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(needle)):
        validate(spec(**kw))
