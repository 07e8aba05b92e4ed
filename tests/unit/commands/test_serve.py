"""The plan as logged at start: a one-line summary with the URL first, then the plan; secrets never appear."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from tests.support.host_files import write_model

from neuronserve.cli import main
from neuronserve.commands.serve import redacted_plan, summary, url
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


@pytest.mark.parametrize(
    ("address", "shown"),
    [
        (("127.0.0.1", 8080), "http://127.0.0.1:8080"),
        (("0.0.0.0", 8080), "http://127.0.0.1:8080 (listening on every interface, 0.0.0.0 port 8080)"),
        (("::1", 9000, 0, 0), "http://[::1]:9000"),
        (("::", 9000, 0, 0), "http://[::1]:9000 (listening on every interface, :: port 9000)"),
    ],
)
def test_the_url_a_person_on_this_host_opens(address: tuple[object, ...], shown: str) -> None:
    assert url(address) == shown


def test_the_summary_says_where_and_what_in_one_short_line() -> None:
    argv = (*ARGV, "--served-model-name", "SmolLM2", "--max-model-len", "2048")
    plan = LaunchPlan(
        device="cpu",
        argv=argv,
        env={},
        model=ModelSpec(source="local", uri="/m", local_path="/m"),
        neuron_override=None,
        cache_key=None,
        warnings=(),
    )
    line = summary(plan, ("127.0.0.1", 8080))
    assert line == (
        "serving SmolLM2 at http://127.0.0.1:8080: model /m (local), cpu device, max_model_len 2048; "
        "/ping answers 200 once the engine is ready"
    )
    assert "\n" not in line and len(line) < 200  # the 2.5 KB JSON plan follows it, not before it


def test_a_malformed_front_workers_is_exit_2_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write_model(tmp_path / "m", {"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    env = {
        "SM_VLLM_MODEL": str(model),
        "NEURONSERVE_WORK_DIR": str(tmp_path / "w"),
        "SAGEMAKER_BIND_TO_PORT": "0",
    }
    handlers, level = logging.root.handlers[:], logging.root.level  # `serve` sets up logging: put it back
    try:
        assert main(["serve", "--device", "cpu"], {**env, "NEURONSERVE_FRONT_WORKERS": "two"}) == 2
    finally:
        logging.root.handlers[:] = handlers
        logging.root.setLevel(level)
    err = capsys.readouterr().err
    assert "NEURONSERVE_FRONT_WORKERS='two' must be a whole number >= 1 or auto" in err
    assert "Traceback" not in err
