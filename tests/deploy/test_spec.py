"""The deployment as data (deploy/spec.py): the requests it builds, checked against botocore's service
models (`service_model.check`), and the refusals made before any AWS call, each naming its flag."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

pytest.importorskip("botocore")

from deploy_specs import FULL, TRN, spec
from service_model import check

from neuronserve.deploy.autoscale import policy_request
from neuronserve.deploy.spec import (
    DeploySpec,
    config_request,
    container_request,
    model_request,
    validate,
    variant_request,
)
from neuronserve.errors import ConfigError


def test_requests_use_an_uncompressed_prefix_and_neuron_sized_timeouts() -> None:
    s = spec()
    assert container_request(s)["ModelDataSource"] == {
        "S3DataSource": {
            "S3Uri": "s3://bucket/models/tiny/",
            "S3DataType": "S3Prefix",
            "CompressionType": "None",
        }
    }
    variant = variant_request(s)
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 3600
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 3600
    assert variant["VolumeSizeInGB"] == 100
    big = {"SM_VLLM_TENSOR_PARALLEL_SIZE": "8"}
    assert variant_request(spec(instance_type="ml.inf2.48xlarge", env=big))["VolumeSizeInGB"] == 512
    # trn1/trn1n/trn2 have local NVMe only: SageMaker refuses VolumeSizeInGB there
    assert "VolumeSizeInGB" not in variant_request(spec(instance_type="ml.trn1.32xlarge", env=big))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"model_data_s3": "s3://bucket/model.tar.gz"}, "ending with '/'"),
        ({"model_data_s3": None, "env": {}}, "no model"),
        ({"startup_timeout_s": 7200}, "60 to 3600"),
        ({"volume_gb": 1000}, "1 to 512"),
        ({"env": {"SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}}, "exceeds the 2 NeuronCores"),
    ],
)
def test_validate_refuses_before_any_call(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate(spec(**kw))


@pytest.mark.parametrize("spec", [FULL, TRN], ids=["inf2-everything", "trn1-revision"])
def test_create_requests_match_the_sagemaker_model(spec: DeploySpec) -> None:
    validate(spec)
    check("sagemaker", "CreateModel", model_request(spec))
    check("sagemaker", "CreateEndpointConfig", config_request(spec))
    assert model_request(spec)["EnableNetworkIsolation"] is True


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
