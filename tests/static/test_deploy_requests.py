"""The SageMaker requests `sagemaker/deploy.py --dry-run` prints (exactly what deploy sends): no trn variant
carries `VolumeSizeInGB` or a storage `KmsKeyId`.

trn1, trn1n and trn2 have local NVMe storage only; SageMaker refuses an EBS volume size for them
(sagemaker-core 2.27 sagemaker/core/common_utils.py:1624 `volume_size_supported`, :1660
`instance_supports_kms`). Every Neuron instance type the deploy tooling knows is checked.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from static_support import ROOT

from neuronserve.plan.fit.instances import INSTANCES

pytestmark = pytest.mark.static

NEURON_CORES = [f"ml.{name}" for name in INSTANCES]  # every Neuron type, in SageMaker's spelling


def dry_run(instance: str, *extra: str) -> subprocess.CompletedProcess[str]:
    length = [] if "--env-file" in extra else ["--env", "SM_VLLM_MAX_MODEL_LEN=2048"]
    return subprocess.run(
        [
            sys.executable, str(ROOT / "sagemaker" / "deploy.py"), "--dry-run",
            "--name", "ns", "--image", "IMAGE", "--role", "arn:aws:iam::123456789012:role/sm",
            "--instance-type", instance, "--model-data", "s3://bucket/model/",
            "--env", "SM_VLLM_TENSOR_PARALLEL_SIZE=2", *length, *extra,
        ],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.parametrize("instance", sorted(NEURON_CORES))
def test_volume_size_only_where_the_family_has_ebs(instance: str) -> None:
    result = dry_run(instance)
    assert result.returncode == 0, result.stderr
    variant = json.loads(result.stdout)["config"]["ProductionVariants"][0]
    if instance.startswith("ml.trn"):
        assert "VolumeSizeInGB" not in variant, f"{instance}: SageMaker refuses VolumeSizeInGB"
    else:
        assert 1 <= variant["VolumeSizeInGB"] <= 512


@pytest.mark.parametrize("instance", sorted(i for i in NEURON_CORES if i.startswith("ml.trn")))
def test_trn_refuses_volume_and_kms_flags_before_any_call(instance: str) -> None:
    for flags in (["--volume-size", "100"], ["--kms-key", "alias/mine"]):
        result = dry_run(instance, *flags)
        assert result.returncode == 2 and "local NVMe" in result.stderr, (flags, result.stderr)
        assert "Traceback" not in result.stderr


def test_trn_sample_environment_deploys_without_a_volume() -> None:
    result = dry_run(
        "ml.trn1.32xlarge", "--env-file", str(ROOT / "sagemaker/envs/trn1-32xlarge-llama3-8b.env")
    )
    assert result.returncode == 0, result.stderr
    assert "VolumeSizeInGB" not in result.stdout
