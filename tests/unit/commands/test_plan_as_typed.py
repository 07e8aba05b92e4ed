"""`neuronserve plan` run as a user types it (a subprocess, the environment as given) on the settings people
bring from other Neuron containers (issue 42): each is honoured or refused, never dropped in silence.

- TGI Neuron's HF_BATCH_SIZE / HF_SEQUENCE_LENGTH are the compiled batch and length;
- near misses of a mapped name (NEURONSERVE_*, OPTION_*, option.*, HF_*, TENSOR_PARALLEL_DEGREE) are
  refused naming the closest, huggingface_hub's own HF_* names pass;
- the HBM refusal's advice names the setting as the user set it (serving.properties, HF_*);
- LMI's and TGI's quantize settings are refused as SM_VLLM_QUANTIZATION is;
- a CPU plan that dropped Neuron settings says first that nothing Neuron was checked;
- inf1 is refused as Inferentia1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "tests" / "data" / "models"
LLAMA_70B = MODELS / "Llama-3.3-70B-Instruct"
TINY = MODELS / "TinyLlama-1.1B-Chat-v1.0"


def plan(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m neuronserve plan ARGS` with only `env` and what a shell has (no NEURON*/SM_*/HF_*)."""
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT / "src"),
        "HF_HUB_OFFLINE": "1",
        "SM_MODEL_DIR": str(tmp_path / "no-model-dir"),
        "NEURONSERVE_WORK_DIR": str(tmp_path / "work"),
    }
    return subprocess.run(
        [sys.executable, "-m", "neuronserve", "plan", *args],
        capture_output=True, text=True, env={**base, **env}, cwd=tmp_path, timeout=120,
    )  # fmt: skip


def argv_value(doc: dict[str, object], flag: str) -> str:
    argv = list(doc["argv"])  # type: ignore[call-overload]
    return str(argv[argv.index(flag) + 1])


def test_tgi_neuron_batch_and_length_are_the_compiled_shapes(tmp_path: Path) -> None:
    """The issue's case: a 70B configured as for the TGI Neuron image on inf2.48xlarge. Both names were
    dropped, so the plan took 131,072 tokens and batch 8 and refused at 296 % HBM."""
    env = {
        "HF_MODEL_ID": str(LLAMA_70B),
        "HF_NUM_CORES": "24",
        "HF_BATCH_SIZE": "4",
        "HF_SEQUENCE_LENGTH": "4096",
        "HF_AUTO_CAST_TYPE": "bf16",
    }
    result = plan(tmp_path, env, "--json", "--instance-type", "inf2.48xlarge")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert argv_value(doc, "--max-num-seqs") == "4" and argv_value(doc, "--max-model-len") == "4096"
    assert argv_value(doc, "--tensor-parallel-size") == "24"
    # the router's names must agree with the compiled ones, as tgi_env.py requires
    clash = plan(tmp_path, {**env, "MAX_BATCH_SIZE": "8"}, "--instance-type", "inf2.48xlarge")
    assert clash.returncode == 2 and "HF_BATCH_SIZE=4" in clash.stderr and "MAX_BATCH_SIZE=8" in clash.stderr


def test_a_refusal_advises_the_tgi_names_the_user_set(tmp_path: Path) -> None:
    env = {
        "HF_MODEL_ID": str(LLAMA_70B),
        "HF_NUM_CORES": "24",
        "HF_BATCH_SIZE": "8",
        "HF_SEQUENCE_LENGTH": "131072",
    }
    result = plan(tmp_path, env, "--instance-type", "inf2.48xlarge")
    assert result.returncode == 2
    assert "HF_SEQUENCE_LENGTH<=" in result.stderr and "HF_BATCH_SIZE<=" in result.stderr, result.stderr
    assert "SM_VLLM_MAX_MODEL_LEN" not in result.stderr and "SM_VLLM_MAX_NUM_SEQS" not in result.stderr


def test_advice_names_the_serving_properties_option_and_following_it_plans(tmp_path: Path) -> None:
    """With option.tensor_parallel_degree=8 the refusal said `set SM_VLLM_TENSOR_PARALLEL_SIZE=24`, which
    was then refused as a conflict with serving.properties."""
    model_dir = tmp_path / "model-dir"
    model_dir.mkdir()
    props = model_dir / "serving.properties"
    lines = [f"option.model_id={LLAMA_70B}", "option.n_positions=8192", "option.max_rolling_batch_size=4"]
    props.write_text("\n".join([*lines, "option.tensor_parallel_degree=8"]) + "\n")
    env = {"SM_MODEL_DIR": str(model_dir)}
    refused = plan(tmp_path, env, "--instance-type", "inf2.48xlarge")
    assert refused.returncode == 2
    assert "set serving.properties option.tensor_parallel_degree=24" in refused.stderr, refused.stderr
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE" not in refused.stderr
    props.write_text("\n".join([*lines, "option.tensor_parallel_degree=24"]) + "\n")  # the advice, followed
    followed = plan(tmp_path, env, "--json", "--instance-type", "inf2.48xlarge")
    assert followed.returncode == 0, followed.stderr
    assert argv_value(json.loads(followed.stdout), "--tensor-parallel-size") == "24"


@pytest.mark.parametrize(
    ("env", "properties", "said"),
    [
        (
            {"OPTION_TENSOR_PARALLEL_DEGRE": "1"},
            "",
            "OPTION_TENSOR_PARALLEL_DEGRE: not a setting this image maps (LMI): did you mean "
            "OPTION_TENSOR_PARALLEL_DEGREE?",
        ),
        (
            {},
            "option.tensor_parallel_degre=1\n",
            "serving.properties option.tensor_parallel_degre: not a setting this image maps (LMI): did you "
            "mean option.tensor_parallel_degree?",
        ),
        ({"OPTION_N_POSITION": "1024"}, "", "did you mean OPTION_N_POSITIONS?"),
        (
            {"HF_NUM_CORE": "1"},
            "",
            "HF_NUM_CORE: not a setting this image maps (TGI / Hugging Face): did you mean HF_NUM_CORES?",
        ),
        ({"HF_SEQUENCE_LENGHT": "1024"}, "", "did you mean HF_SEQUENCE_LENGTH?"),
        ({"TENSOR_PARALLEL_DEGRE": "1"}, "", "did you mean TENSOR_PARALLEL_DEGREE?"),
        ({"MAX_BATCH_SIZ": "4"}, "", "did you mean MAX_BATCH_SIZE?"),
        (
            {"NEURONSERVE_WORK_DRI": "/tmp/x"},
            "",
            "NEURONSERVE_WORK_DRI: not a neuronserve setting: did you mean NEURONSERVE_WORK_DIR?",
        ),
        ({"NEURONSERVE_NOTHING_LIKE_IT": "1"}, "", "NEURONSERVE_NOTHING_LIKE_IT: not a neuronserve setting"),
    ],
)
def test_a_near_miss_of_a_mapped_name_is_refused_naming_the_closest(
    tmp_path: Path, env: dict[str, str], properties: str, said: str
) -> None:
    model_dir = tmp_path / "model-dir"
    model_dir.mkdir()
    if properties:
        (model_dir / "serving.properties").write_text(properties)
    model = {"SM_VLLM_MODEL": str(TINY), "SM_MODEL_DIR": str(model_dir)}
    result = plan(tmp_path, {**model, **env}, "--device", "cpu")
    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_hub_names_other_lmi_options_and_tooling_pass(tmp_path: Path) -> None:
    """huggingface_hub's HF_* names pass untouched; an LMI option far from every mapped one keeps the
    warning that lists it; the project's own tooling variables are not settings."""
    env = {
        "SM_VLLM_MODEL": str(TINY),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_TOKEN_PATH": str(tmp_path / "token"),
        "HF_HUB_ENABLE_HF_TRANSFER": "0",
        "HF_ENDPOINT": "https://huggingface.co",
        "HF_MODEL_DIR": "/opt/ml/model",  # two edits from HF_MODEL_ID: too short a name to call it a typo
        "OPTION_ROLLING_BATCH": "vllm",
        "OPTION_SPECULATIVE_DRAFT_MODEL": "x",
        "NEURONSERVE_VENV": str(tmp_path / "venv"),
    }
    result = plan(tmp_path, env, "--json", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    warnings = json.loads(result.stdout)["warnings"]
    assert any(
        "ignored unknown LMI settings" in w and "OPTION_SPECULATIVE_DRAFT_MODEL" in w for w in warnings
    )


@pytest.mark.parametrize(
    ("name", "value"), [("OPTION_QUANTIZE", "awq"), ("HF_MODEL_QUANTIZE", "awq"), ("QUANTIZE", "gptq")]
)
def test_lmi_and_tgi_quantize_are_refused_with_the_neuron_way(tmp_path: Path, name: str, value: str) -> None:
    """OPTION_QUANTIZE=awq used to warn and serve bf16; now it is vLLM's --quantization, which the plugin
    never reads, refused as SM_VLLM_QUANTIZATION is."""
    env = {"SM_VLLM_MODEL": str(TINY), "SM_VLLM_MAX_MODEL_LEN": "1024", name: value}
    result = plan(tmp_path, env, "--instance-type", "inf2.xlarge")
    assert result.returncode == 2, result.stdout
    assert f"{name}={value}: vllm-neuron 0.2.2+lts never reads vLLM's quantization setting" in result.stderr
    assert "SM_NEURON_QUANTIZED=true" in result.stderr


def test_a_cpu_plan_that_dropped_neuron_settings_says_so_first(tmp_path: Path) -> None:
    env = {"SM_VLLM_MODEL": str(TINY), "SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}
    text = plan(tmp_path, env)
    assert text.returncode == 0, text.stderr
    first = text.stdout.splitlines()[:2]
    assert first[0].startswith("NO NEURON RULE CHECKED") and "SM_VLLM_TENSOR_PARALLEL_SIZE" in first[0]
    assert "neuronserve plan --instance-type" in first[1]
    as_json = plan(tmp_path, env, "--json")  # stdout stays one JSON document; the note is on stderr
    assert json.loads(as_json.stdout)["device"] == "cpu"
    assert as_json.stderr.startswith("NO NEURON RULE CHECKED")
    asked = plan(tmp_path, env, "--device", "cpu")  # a CPU plan asked for: nothing to point out
    assert asked.returncode == 0 and "NO NEURON RULE CHECKED" not in asked.stdout + asked.stderr


@pytest.mark.parametrize("instance", ["ml.inf1.xlarge", "inf1.24xlarge"])
def test_inf1_is_refused_as_inferentia1(tmp_path: Path, instance: str) -> None:
    env = {"SM_VLLM_MODEL": str(TINY)}
    plain = plan(tmp_path, env, "--instance-type", instance)
    recommend = plan(
        tmp_path, env, "--recommend", "--instance-type", instance, "--model-config", str(TINY / "config.json")
    )
    for result in (plain, recommend):
        assert result.returncode == 2, result.stdout
        assert f"--instance-type='{instance}' is Inferentia1 (inf1), which vLLM on Neuron does not serve" in (
            result.stderr
        ), result.stderr
    variable = plan(tmp_path, {**env, "NEURONSERVE_INSTANCE_TYPE": instance})
    assert (
        variable.returncode == 2
        and f"NEURONSERVE_INSTANCE_TYPE='{instance}' is Inferentia1" in variable.stderr
    )


@pytest.mark.parametrize(
    "name", ["NEURONSERVE_FAST_PATH", "NEURONSERVE_PROBE_THREAD", "NEURONSERVE_PROBE_DOOR"]
)
def test_a_retired_setting_is_warned_not_refused(tmp_path: Path, name: str) -> None:
    """A deployment that still sets a removed setting keeps planning; the warning says it is ignored."""
    result = plan(tmp_path, {"SM_VLLM_MODEL": str(TINY), name: "true"}, "--device", "cpu", "--json")
    assert result.returncode == 0, result.stderr
    warnings = json.loads(result.stdout)["warnings"]
    assert any(w.startswith(f"{name} is ignored") for w in warnings), warnings
    misspelt = plan(tmp_path, {"SM_VLLM_MODEL": str(TINY), name + "S": "true"}, "--device", "cpu")
    assert misspelt.returncode == 2 and "not a neuronserve setting" in misspelt.stderr
