"""Pure parts of the deploy tooling: environment files, the NeuronCore check, scaling requests, samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronserve.deploy.autoscale import policy_request, scalable_target_request
from neuronserve.deploy.endpoint import DeploySpec, container_request, validate, variant_request
from neuronserve.deploy.envfile import load_env, parse_env_lines
from neuronserve.deploy.instances import check_tensor_parallel, tensor_parallel_size
from neuronserve.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = {
    "inf2-xlarge-tinyllama.env": "ml.inf2.xlarge",
    "inf2-48xlarge-llama3-8b.env": "ml.inf2.48xlarge",
    "trn1-32xlarge-llama3-8b.env": "ml.trn1.32xlarge",
}


def test_env_file_then_flags(tmp_path: Path) -> None:
    f = tmp_path / "x.env"
    f.write_text("# comment\n\nSM_VLLM_MAX_MODEL_LEN=2048\nSM_NEURON_BUCKETS=[1,2]\nEMPTY=\nA=b=c\n")
    env = load_env(str(f), ["SM_VLLM_MAX_MODEL_LEN=4096", "NEW=1"])
    assert env == {
        "SM_VLLM_MAX_MODEL_LEN": "4096",
        "SM_NEURON_BUCKETS": "[1,2]",
        "EMPTY": "",
        "A": "b=c",
        "NEW": "1",
    }


@pytest.mark.parametrize("line", ["no-equals", "1BAD=x", "=x", "SPACE KEY=x"])
def test_env_file_rejects_malformed_lines(line: str) -> None:
    with pytest.raises(ConfigError, match="src:1"):
        parse_env_lines([line], "src")


def test_env_size_limits() -> None:
    with pytest.raises(ConfigError, match="1024 bytes"):
        load_env(None, ["A=" + "x" * 1025])
    with pytest.raises(ConfigError, match="32768"):
        load_env(None, [f"K{i}={'x' * 1000}" for i in range(40)])


@pytest.mark.parametrize(
    ("env", "instance", "tp"),
    [
        ({}, "ml.inf2.xlarge", 1),
        ({"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}, "ml.inf2.xlarge", 2),
        ({"OPTION_TENSOR_PARALLEL_DEGREE": "max"}, "ml.inf2.48xlarge", 24),
        ({"HF_NUM_CORES": "32"}, "ml.trn1.32xlarge", 32),
        ({"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "HF_NUM_CORES": "2"}, "ml.inf2.48xlarge", 8),
    ],
)
def test_tensor_parallel_size(env: dict[str, str], instance: str, tp: int) -> None:
    assert tensor_parallel_size(env, instance) == tp
    assert check_tensor_parallel(env, instance) == tp


def test_tp_larger_than_the_instance_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"32 exceeds the 24 NeuronCores of ml\.inf2\.48xlarge"):
        check_tensor_parallel({"SM_VLLM_TENSOR_PARALLEL_SIZE": "32"}, "ml.inf2.48xlarge")
    with pytest.raises(ConfigError, match="not a Neuron instance type"):
        check_tensor_parallel({}, "ml.g5.xlarge")
    with pytest.raises(ConfigError, match="positive integer"):
        check_tensor_parallel({"HF_NUM_CORES": "two"}, "ml.inf2.xlarge")


def spec(**kw: object) -> DeploySpec:
    base: dict[str, object] = {
        "name": "ns-test",
        "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/neuronserve:neuron",
        "role_arn": "arn:aws:iam::123456789012:role/sm",
        "instance_type": "ml.inf2.xlarge",
        "env": {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"},
        "model_data_s3": "s3://bucket/models/tiny/",
    }
    base.update(kw)
    return DeploySpec(**base)  # type: ignore[arg-type]


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


@pytest.mark.parametrize(("name", "instance"), SAMPLES.items())
def test_sample_environments_fit_their_instances(name: str, instance: str) -> None:
    env = load_env(str(ROOT / "sagemaker" / "envs" / name), [])
    tp = check_tensor_parallel(env, instance)
    assert tp >= 2
    max_len = int(env["SM_VLLM_MAX_MODEL_LEN"])
    if env.get("SM_VLLM_ENABLE_PREFIX_CACHING") == "true":
        block = int(env["SM_VLLM_BLOCK_SIZE"])
        seqs = int(env["SM_VLLM_MAX_NUM_SEQS"])
        assert max_len % block == 0
        assert int(env["SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE"]) >= -(-max_len // block) * seqs
        assert env["SM_NEURON_IS_PREFIX_CACHING"] == env["SM_NEURON_IS_BLOCK_KV_LAYOUT"] == "true"


def test_autoscaling_requests() -> None:
    target = scalable_target_request("ep", "AllTraffic", 1, 3)
    assert target["ResourceId"] == "endpoint/ep/variant/AllTraffic"
    assert target["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    policy = policy_request("ep", "AllTraffic", 12)
    config = policy["TargetTrackingScalingPolicyConfiguration"]
    assert (
        config["PredefinedMetricSpecification"]["PredefinedMetricType"]
        == "SageMakerVariantInvocationsPerInstance"
    )
    assert config["TargetValue"] == 12.0
    with pytest.raises(ConfigError):
        scalable_target_request("ep", "AllTraffic", 3, 1)


@pytest.mark.parametrize(("name", "instance"), SAMPLES.items())
def test_sample_environments_pass_the_plan_for_neuron(name: str, instance: str) -> None:
    """`neuronserve plan --device neuron` (every Neuron rule) accepts each sample on its instance's cores."""
    import os
    import subprocess
    import sys

    from neuronserve.deploy.instances import neuron_cores

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "OPTION_", "HF_", "NEURON"))}
    env.update(load_env(str(ROOT / "sagemaker" / "envs" / name), []))
    env["HF_MODEL_ID"] = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
    env["NEURON_RT_VISIBLE_CORES"] = f"0-{neuron_cores(instance) - 1}"
    env["PYTHONPATH"] = str(ROOT / "src")
    result = subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan", "--json", "--device", "neuron"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    argv = json.loads(result.stdout)["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == env["SM_VLLM_TENSOR_PARALLEL_SIZE"]
