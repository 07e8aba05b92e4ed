"""Every SageMaker and autoscaling request the deploy tooling builds, checked against botocore's
service models (`service_model.check`)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

pytest.importorskip("botocore")

from service_model import check

from neuronserve.deploy.autoscale import policy_request, scalable_target_request
from neuronserve.deploy.rollout import Rollout, update_request
from neuronserve.deploy.spec import DeploySpec, config_request, model_request, validate

FULL = DeploySpec(
    name="ns-full",
    image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/neuronserve:x",
    role_arn="arn:aws:iam::123456789012:role/sm",
    instance_type="ml.inf2.48xlarge",
    env={"SM_VLLM_TENSOR_PARALLEL_SIZE": "8"},
    model_data_s3="s3://bucket/model/",
    instance_count=2,
    tags={"team": "ml"},
    subnets=("subnet-1", "subnet-2"),
    security_groups=("sg-1",),
    kms_key="arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    network_isolation=True,
    async_output_s3="s3://bucket/out/",
    async_failure_s3="s3://bucket/failed/",
    async_max_concurrent=8,
)
TRN = replace(FULL, instance_type="ml.trn1.32xlarge", kms_key=None, revision="0a1b2c3d")


@pytest.mark.parametrize("spec", [FULL, TRN], ids=["inf2-everything", "trn1-revision"])
def test_create_requests_match_the_sagemaker_model(spec: DeploySpec) -> None:
    validate(spec)
    check("sagemaker", "CreateModel", model_request(spec))
    check("sagemaker", "CreateEndpointConfig", config_request(spec))
    assert model_request(spec)["EnableNetworkIsolation"] is True


@pytest.mark.parametrize(
    "rollout",
    [Rollout(), Rollout(traffic="canary", canary_percent=10, alarms=("a", "b"), wait_interval_s=0)],
    ids=["all-at-once", "canary-alarms"],
)
def test_update_request_matches_the_sagemaker_model(rollout: Rollout) -> None:
    request = update_request(FULL, rollout)
    check("sagemaker", "UpdateEndpoint", request)
    assert request["EndpointConfigName"].startswith("ns-full-config-")


@pytest.mark.parametrize("metric", ["invocations", "concurrency"])
def test_autoscaling_requests_match_the_model(metric: str) -> None:
    check(
        "application-autoscaling", "RegisterScalableTarget", scalable_target_request("ns", "AllTraffic", 1, 4)
    )
    check("application-autoscaling", "PutScalingPolicy", policy_request("ns", "AllTraffic", 6, metric=metric))


def test_the_checker_can_fail() -> None:
    bad = config_request(FULL)
    bad["ProductionVariants"][0]["VolumeSizeInGB"] = 513
    with pytest.raises(AssertionError, match="513 > 512"):
        check("sagemaker", "CreateEndpointConfig", bad)
    with pytest.raises(AssertionError, match="not in"):
        check(
            "application-autoscaling",
            "PutScalingPolicy",
            {**policy_request("n", "v", 1), "PolicyType": "Nope"},
        )


def test_the_neuron_ami_and_its_driver_are_what_the_model_documents() -> None:
    """The note `deploy` prints about the AMI's Neuron driver rests on the service model's own text."""
    import re

    import botocore.session

    from neuronserve.deploy.spec import NEURON_AMI, NEURON_AMI_DRIVER

    model = botocore.session.get_session().get_service_model("sagemaker")
    assert NEURON_AMI in model.shape_for("ProductionVariantInferenceAmiVersion").enum
    doc = re.sub(
        r"<[^>]+>", " ", model.shape_for("ProductionVariant").members["InferenceAmiVersion"].documentation
    )
    section = doc[doc.index(NEURON_AMI) :]
    assert re.search(r"Neuron driver version:\s*" + re.escape(NEURON_AMI_DRIVER) + r"\b", section)


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
    from neuronserve.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(needle)):
        validate(replace(FULL, **change))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rollout", "needle"),
    [
        (Rollout(traffic="linear"), "all-at-once or canary"),
        (Rollout(alarms=tuple(f"a{i}" for i in range(11))), "at most 10"),
        (Rollout(wait_interval_s=3601), "0 to 3600"),
        (Rollout(traffic="canary", canary_percent=60), "1 to 50"),
    ],
)
def test_rollout_refusals(rollout: Rollout, needle: str) -> None:
    from neuronserve.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(needle)):
        update_request(FULL, rollout)
