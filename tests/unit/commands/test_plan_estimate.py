"""`neuronserve plan` as a real subprocess: the speed estimate in --json and in the text form, the workload
flags, and their refusals (exit 2, naming the flag)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.host_files import write_model

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "tests" / "data" / "models" / "Llama-3.1-8B" / "config.json"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    model = write_model(tmp_path / "llama", json.loads(CONFIG.read_text()))
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    return {
        **keep,
        "PYTHONPATH": str(ROOT / "src"),
        "HF_HUB_OFFLINE": "1",
        "SM_VLLM_MODEL": str(model),
        "SM_MODEL_DIR": str(tmp_path / "none"),
        "NEURONSERVE_WORK_DIR": str(tmp_path / "work"),
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "8",
        "SM_VLLM_MAX_MODEL_LEN": "4096",
        "SM_VLLM_MAX_NUM_SEQS": "32",
    }


def plan(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan", "--device", "neuron", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_json_estimate_follows_the_flags(env: dict[str, str]) -> None:
    out = plan(
        env,
        "--json",
        "--instance-type",
        "ml.inf2.48xlarge",
        "--input-len",
        "1500",
        "--output-len",
        "250",
        "--concurrency",
        "1",
    )
    assert out.returncode == 0, out.stderr
    est = json.loads(out.stdout)["estimate"]
    assert (est["input_len"], est["output_len"], est["concurrency"]) == (1500, 250, 1)
    for key in ("ttft_ms", "tpot_ms", "output_tokens_per_s", "instance_output_tokens_per_s"):
        assert est[key] > 0 and est["band"][key][0] < est[key] < est["band"][key][1]
    default = json.loads(plan(env, "--json", "--instance-type", "inf2.48xlarge").stdout)["estimate"]
    assert (default["input_len"], default["output_len"], default["concurrency"]) == (1024, 256, 32)
    assert default["tpot_ms"] > est["tpot_ms"]  # 32 sequences wait on each other's prefills


def test_text_says_estimate_basis_and_band(env: dict[str, str]) -> None:
    out = plan(env, "--instance-type", "trn2.48xlarge")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "estimate:" in text and "basis: physical model" in text and "likely" in text
    assert "optimum-neuron" in text and "docs/FIT.md" in text


def test_no_instance_no_estimate(env: dict[str, str]) -> None:
    out = plan(env, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["estimate"] is None


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--input-len", "0"], "argument --input-len: '0' is not a positive whole number"),
        (["--concurrency", "many"], "argument --concurrency: 'many' is not a positive whole number"),
        (
            ["--input-len", "4000", "--output-len", "200"],
            "--input-len 4000 + --output-len 200 exceeds max_model_len 4096",
        ),
    ],
)
def test_bad_workloads_exit_2_naming_the_flag(env: dict[str, str], args: list[str], said: str) -> None:
    out = plan(env, "--json", "--instance-type", "inf2.48xlarge", *args)
    assert out.returncode == 2
    assert said in out.stderr and "Traceback" not in out.stderr


def _eagle3(env: dict[str, str], tokens: int) -> dict[str, str]:
    """Lane 2.32 (vLLM's own EAGLE proposer) with a hub EAGLE-3 head, as vllm-neuron's tutorial runs it."""
    spec = {"method": "eagle3", "model": "org/EAGLE3-head", "num_speculative_tokens": tokens}
    return {
        **env,
        "NEURONSERVE_STACK": "2.32",
        "SM_VLLM_MAX_NUM_SEQS": "2",
        "SM_VLLM_SPECULATIVE_CONFIG": json.dumps(spec),
        "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"temperature": "0"}',
    }


def test_acceptance_length_replaces_the_assumed_tokens_per_step(env: dict[str, str]) -> None:
    """The plan says what a speculative step is taken to yield, and a measured acceptance length (what
    `vllm bench serve` prints) replaces the assumption: more tokens a step, a shorter TPOT."""
    spec = _eagle3(env, 3)
    assumed = plan(spec, "--json", "--instance-type", "trn2.48xlarge")
    measured = plan(spec, "--json", "--instance-type", "trn2.48xlarge", "--acceptance-length", "3.22")
    assert assumed.returncode == 0 and measured.returncode == 0, assumed.stderr + measured.stderr
    a, m = (json.loads(p.stdout)["estimate"] for p in (assumed, measured))
    assert a["speculation"]["drafts_verified"] == 3 and a["speculation"]["tokens_per_step"] == 2.8
    assert a["speculation"]["tokens_per_step_basis"].startswith("assumed")
    assert m["speculation"]["tokens_per_step"] == 3.22
    assert m["speculation"]["tokens_per_step_basis"] == "--acceptance-length"
    assert m["tpot_ms"] < a["tpot_ms"]
    text = plan(spec, "--instance-type", "trn2.48xlarge").stdout
    assert "speculation: 2.8 tokens a step from 3 draft token(s) verified" in text


@pytest.mark.parametrize(
    ("speculative", "args", "said"),
    [
        (False, ["--acceptance-length", "0.5"], "argument --acceptance-length: '0.5' is not a number"),
        (False, ["--acceptance-length", "2"], "--acceptance-length 2: the plan has no speculative decoding"),
        (True, ["--acceptance-length", "4.5"], "so at most 4 tokens a step"),
    ],
)
def test_bad_acceptance_lengths_exit_2_naming_the_flag(
    env: dict[str, str], speculative: bool, args: list[str], said: str
) -> None:
    out = plan(_eagle3(env, 3) if speculative else env, "--json", "--instance-type", "trn2.48xlarge", *args)
    assert out.returncode == 2, out.stdout
    assert said in out.stderr and "Traceback" not in out.stderr
