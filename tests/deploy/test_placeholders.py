"""Placeholder buckets (deploy/placeholders.py): refused wherever an S3 location appears, a real bucket
passes, and the refusal names the variable without showing its value."""

from __future__ import annotations

import pytest

from neuronserve.deploy.placeholders import check_placeholders, is_placeholder
from neuronserve.errors import ConfigError


@pytest.mark.parametrize(
    "bucket",
    ["my-bucket", "MY-BUCKET", "your-bucket", "example", "amzn-s3-demo-bucket1", "BUCKET", "<bucket>",
     "${BUCKET}", "{bucket}", "", "doc-example-bucket-42"],
)  # fmt: skip
def test_placeholders(bucket: str) -> None:
    assert is_placeholder(bucket)


@pytest.mark.parametrize(
    "bucket", ["acme-ml-models", "my-bucket-for-llama", "bucket", "b", "logs.example.com"]
)
def test_real_names_pass(bucket: str) -> None:
    assert not is_placeholder(bucket)


def test_found_in_any_value_and_named() -> None:
    check_placeholders({"NEURONSERVE_CACHE_URI": "s3://acme/cache/", "HF_MODEL_ID": "org/model"})
    lora = '[{"name": "a", "path": "s3://my-bucket/adapters/a/"}]'
    with pytest.raises(ConfigError, match=r"SM_VLLM_LORA_MODULES: s3://my-bucket/ is a placeholder") as err:
        check_placeholders({"SM_VLLM_LORA_MODULES": lora})
    assert err.value.variables == ("SM_VLLM_LORA_MODULES",)
    with pytest.raises(ConfigError, match=r"--model-data: s3:/// names no bucket"):
        check_placeholders({"--async-output": None, "--model-data": "s3:///models/"})


def test_a_secret_value_is_not_shown() -> None:
    with pytest.raises(ConfigError) as err:
        check_placeholders({"MY_SECRET": "s3://example/hunter2-credentials"})
    assert "hunter2" not in str(err.value) and "MY_SECRET" in str(err.value)
