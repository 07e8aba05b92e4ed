"""The plan as logged at start: secrets never appear."""

from __future__ import annotations

import json

from neuronserve.commands.serve import redacted_plan
from neuronserve.types import LaunchPlan, ModelSpec

ARGV = ("python", "-m", "vllm", "--model", "/m", "--api-key", "sk-123", "--hf-token", "hf_abc", "--port", "1")


def test_secrets_are_redacted_in_the_logged_plan() -> None:
    plan = LaunchPlan(
        device="cpu",
        argv=ARGV,
        env={"HF_TOKEN": "hf_abc", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "VLLM_CPU_KVCACHE_SPACE": "1"},
        model=ModelSpec(source="local", uri="/m", local_path="/m"),
        neuron_override=None,
        cache_key=None,
        warnings=(),
    )
    text = json.dumps(redacted_plan(plan))
    for secret in ("sk-123", "hf_abc", "s3cr3t"):
        assert secret not in text
    data = redacted_plan(plan)
    assert data["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert data["argv"][-1] == "1" and data["argv"][4] == "/m"
