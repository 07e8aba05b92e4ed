"""Session-wide fixtures: one real moto S3 server on 127.0.0.1, shared by every tier that needs S3; and a
clean environment for every test (the project's variables cleared, then restored after the test)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest
from tests.support.s3server import bucket, s3, s3_env, s3_server

__all__ = ["bucket", "s3", "s3_env", "s3_server"]

# The families of variables the code reads (settings, SageMaker/LMI/TGI names, Neuron runtime, vLLM, AWS).
PROJECT_PREFIXES = ("SM_", "SAGEMAKER_", "OPTION_", "HF_", "NEURON", "VLLM_", "AWS_")
# Variables of those families outside the prefixes (TGI names, the vLLM-neuron scheduler switch).
PROJECT_NAMES = frozenset(
    {"MAX_BATCH_SIZE", "MAX_TOTAL_TOKENS", "TENSOR_PARALLEL_DEGREE", "DISABLE_NEURON_CUSTOM_SCHEDULER"}
)
# What the test runner sets for itself (scripts/test, scripts/bootstrap, the image tier): kept.
RUNNER_NAMES = frozenset(
    {
        "HF_HUB_OFFLINE",
        "HF_HOME",
        "HF_HUB_CACHE",
        "VLLM_CPU_KVCACHE_SPACE",
        "VLLM_NO_USAGE_STATS",
        "NEURONSERVE_CACHE_HOME",  # the venv and the tiny model's cache (scripts/bootstrap, tiny_model.py)
        "NEURONSERVE_IMAGE_CPU",
        "NEURONSERVE_SKIP_IMAGE_DEPS",
        "NEURONSERVE_SKIP_DEPLOY_VENV",
        "NEURONSERVE_MUTATION_SAMPLE",
    }
)


def project_variables(environ: Mapping[str, str]) -> list[str]:
    """The names in `environ` that the code reads as settings and the runner does not need."""
    return sorted(
        name
        for name in environ
        if (name.startswith(PROJECT_PREFIXES) or name in PROJECT_NAMES) and name not in RUNNER_NAMES
    )


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees a setting left in the shell that runs it (restored by monkeypatch afterwards)."""
    for name in project_variables(os.environ):
        monkeypatch.delenv(name)
