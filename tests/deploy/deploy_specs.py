"""Deploy specs the request and refusal tests share: a small one (`spec`) and one with every option
set (`FULL`), plus a Trn1 variant with a revision (`TRN`)."""

from __future__ import annotations

from dataclasses import replace

from neuronserve.deploy.spec import DeploySpec

FULL = DeploySpec(
    name="ns-full",
    image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/neuronserve:x",
    role_arn="arn:aws:iam::123456789012:role/sm",
    instance_type="ml.inf2.48xlarge",
    env={"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "SM_VLLM_MAX_MODEL_LEN": "2048"},
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


def spec(**kw: object) -> DeploySpec:
    base: dict[str, object] = {
        "name": "ns-test",
        "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/neuronserve:neuron",
        "role_arn": "arn:aws:iam::123456789012:role/sm",
        "instance_type": "ml.inf2.xlarge",
        "env": {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "SM_VLLM_MAX_MODEL_LEN": "2048"},
        "model_data_s3": "s3://bucket/models/tiny/",
    }
    base.update(kw)
    return DeploySpec(**base)  # type: ignore[arg-type]
