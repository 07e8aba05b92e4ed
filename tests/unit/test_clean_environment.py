"""Every test starts without the project's variables, whatever the shell that runs pytest has set
(tests/conftest.py clears them and restores them after the test)."""

from __future__ import annotations

import os

import pytest

# What the runner sets for itself and the fixture keeps (tests/conftest.py RUNNER_NAMES).
RUNNER_KEPT = {
    "HF_HUB_OFFLINE",
    "HF_HOME",
    "HF_HUB_CACHE",
    "VLLM_CPU_KVCACHE_SPACE",
    "VLLM_NO_USAGE_STATS",
    "NEURONSERVE_CACHE_HOME",
    "NEURONSERVE_IMAGE_CPU",
    "NEURONSERVE_SKIP_IMAGE_DEPS",
    "NEURONSERVE_SKIP_DEPLOY_VENV",
    "NEURONSERVE_MUTATION_SAMPLE",
}
FAMILIES = ("SM_", "SAGEMAKER_", "OPTION_", "HF_", "NEURON", "VLLM_", "AWS_")


def test_no_project_variable_reaches_a_test() -> None:
    assert [k for k in os.environ if k.startswith(FAMILIES) and k not in RUNNER_KEPT] == []
    assert "MAX_BATCH_SIZE" not in os.environ and "TENSOR_PARALLEL_DEGREE" not in os.environ


def test_a_variable_set_in_a_test_is_gone_in_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SM_VLLM_MAX_NUM_SEQS", "3")
    assert os.environ["SM_VLLM_MAX_NUM_SEQS"] == "3"
