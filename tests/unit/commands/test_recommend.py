"""`neuronserve plan --recommend` (commands/recommend.py) in process through the CLI: the model and
instance it reads (flags, then their variables), the weights' dtype from SM_VLLM_DTYPE, and the text
form's SM_VLLM_* lines, and the goal's price and filters refused when malformed. The recommendation
itself (plan/fit/recommend.py) is tested beside its module."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from neuronserve.cli import main

ROOT = Path(__file__).resolve().parents[3]
CONFIG = str(ROOT / "tests" / "data" / "models" / "Llama-3.2-1B" / "config.json")
ENV = {"SM_MODEL_DIR": "/nonexistent"}


def recommend(capsys: pytest.CaptureFixture[str], *argv: str, **env: str) -> dict[str, Any]:
    assert main(["plan", "--recommend", "--json", "--model-config", CONFIG, *argv], {**ENV, **env}) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_the_instance_comes_from_the_flag_then_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    by_flag = recommend(
        capsys, "--instance-type", "ml.inf2.xlarge", NEURONSERVE_INSTANCE_TYPE="ml.inf2.48xlarge"
    )
    by_var = recommend(capsys, NEURONSERVE_INSTANCE_TYPE=" ml.inf2.xlarge ")
    # the flag sets the variable, as `plan --instance-type` does: the plan's errors name the variable
    assert by_flag["instance"]["source"] == by_var["instance"]["source"] == "NEURONSERVE_INSTANCE_TYPE"
    assert by_flag == by_var
    assert by_flag["instance"]["name"] == "inf2.xlarge"


def test_no_instance_and_no_device_is_refused_naming_both(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["plan", "--recommend", "--model-config", CONFIG], {**ENV, "NEURONSERVE_INSTANCE_TYPE": "  "})
        == 2
    )
    err = capsys.readouterr().err
    assert "--instance-type" in err and "NEURONSERVE_INSTANCE_TYPE" in err


@pytest.mark.parametrize(
    ("dtype", "want"), [(None, "bfloat16"), ("float32", "float32"), ("float16", "float16")]
)
def test_the_dtype_is_sm_vllm_dtype_else_bfloat16(
    dtype: str | None, want: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {} if dtype is None else {"SM_VLLM_DTYPE": dtype}
    doc = recommend(capsys, "--instance-type", "ml.inf2.xlarge", **env)
    assert doc["model"]["dtype"] == want
    assert {c["env"]["SM_VLLM_DTYPE"] for c in doc["configurations"]} == {want}


@pytest.mark.parametrize("dtype", ["fp8", " float32 "])
def test_a_dtype_plan_refuses_is_refused_with_the_plans_error(
    dtype: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--model-config", CONFIG, "--instance-type", "ml.inf2.xlarge"]
    assert main(["plan", "--recommend", *argv], {**ENV, "SM_VLLM_DTYPE": dtype}) == 2
    refused = capsys.readouterr().err
    plan_env = {
        **ENV,
        "SM_VLLM_DTYPE": dtype,
        "SM_VLLM_MODEL": str(Path(CONFIG).parent),
        "NEURONSERVE_DEVICE": "neuron",
    }
    assert main(["plan", "--instance-type", "ml.inf2.xlarge"], plan_env) == 2
    assert capsys.readouterr().err == refused and "is not a vLLM dtype" in refused


def test_wider_weights_take_more_memory(capsys: pytest.CaptureFixture[str]) -> None:
    def weights(**env: str) -> int:
        doc = recommend(
            capsys,
            "--instance-type",
            "ml.inf2.xlarge",
            "--max-model-len",
            "1024",
            "--max-num-seqs",
            "1",
            **env,
        )
        tp1 = [c for c in doc["configurations"] if c["tensor_parallel_size"] == 1]
        return int(tp1[0]["memory"]["weights_bytes_per_core"])

    assert weights(SM_VLLM_DTYPE="float32") > 1.9 * weights()


def test_the_model_comes_from_a_local_directory_or_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", "--recommend", "--instance-type", "ml.inf2.xlarge"]
    assert main(argv, {**ENV, "SM_VLLM_MODEL": str(tmp_path)}) == 2  # a directory without config.json
    assert f"SM_VLLM_MODEL={tmp_path}: a directory without a config.json" in capsys.readouterr().err
    assert main(argv, ENV) == 2
    assert "--recommend needs a model" in capsys.readouterr().err
    (tmp_path / "config.json").write_text(Path(CONFIG).read_text())
    assert main([*argv, "--json"], {**ENV, "SM_VLLM_MODEL": str(tmp_path)}) == 0
    assert json.loads(capsys.readouterr().out)["model"]["name"] == str(tmp_path)


def test_text_form_ends_with_the_best_configurations_lines(capsys: pytest.CaptureFixture[str]) -> None:
    doc = recommend(capsys, "--instance-type", "ml.inf2.xlarge")
    assert (
        main(["plan", "--recommend", "--model-config", CONFIG, "--instance-type", "ml.inf2.xlarge"], ENV) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("instance: inf2.xlarge: 2 NeuronCores")
    tail = lines[lines.index("best configuration:") + 1 :]
    assert dict(shlex.split(line)[0].split("=", 1) for line in tail) == doc["configurations"][0]["env"]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--price-per-hour", "0"], "--price-per-hour"),
        (["--max-tpot-ms", "-1"], "--max-tpot-ms"),
        (["--max-ttft-ms", "nan"], "--max-ttft-ms"),
    ],
)
def test_a_price_or_target_that_is_not_positive_is_refused(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["plan", "--recommend", "--model-config", CONFIG, "--instance-type", "inf2.xlarge"]
    assert main([*base, *argv], ENV) == 2
    assert f"{flag} must be a positive number" in capsys.readouterr().err


def test_the_region_comes_from_the_flag_then_the_aws_variables(capsys: pytest.CaptureFixture[str]) -> None:
    def region(*argv: str, **env: str) -> Any:
        return recommend(capsys, "--instance-type", "inf2.xlarge", "--max-model-len", "1024", *argv, **env)[
            "price"
        ]["region"]

    assert region() == "us-east-1"
    assert region(AWS_DEFAULT_REGION="eu-west-1") == "eu-west-1"
    assert region(AWS_REGION="us-west-2", AWS_DEFAULT_REGION="eu-west-1") == "us-west-2"
    assert region("--region", "eu-central-1", AWS_REGION="us-west-2") == "eu-central-1"
