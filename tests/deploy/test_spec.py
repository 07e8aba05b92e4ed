"""The deployment as data (deploy/spec.py): the requests it builds, checked against botocore's service
models (`service_model.check`); its refusals are tests/deploy/test_speccheck.py's."""

from __future__ import annotations

import re

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
    variant_request,
)
from neuronserve.deploy.speccheck import validate


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

    import botocore.session

    from neuronserve.deploy.driver import NEURON_AMI, NEURON_AMI_DRIVER

    model = botocore.session.get_session().get_service_model("sagemaker")
    assert NEURON_AMI in model.shape_for("ProductionVariantInferenceAmiVersion").enum
    doc = re.sub(
        r"<[^>]+>", " ", model.shape_for("ProductionVariant").members["InferenceAmiVersion"].documentation
    )
    section = doc[doc.index(NEURON_AMI) :]
    assert re.search(r"Neuron driver version:\s*" + re.escape(NEURON_AMI_DRIVER) + r"\b", section)


def test_both_instance_spellings_name_the_same_sagemaker_type() -> None:
    assert spec(instance_type="inf2.xlarge").instance_type == "ml.inf2.xlarge"
    assert variant_request(spec(instance_type="INF2.48xlarge"))["InstanceType"] == "ml.inf2.48xlarge"
    assert spec(instance_type="g5.xlarge").instance_type == "g5.xlarge"  # left for validate to refuse
