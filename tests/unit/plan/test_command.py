"""The engine command around what the lane renders (plan/command.py): the model and listen address, the
user's other flags sorted, the arguments after `--` less those the plan decides, an override after `--`
refused, and the tool-calling flags that must come together, from every dialect.
"""

from __future__ import annotations

import pytest
from tests.support.builders import (
    facts,
    llama_plan,
    plan,
    raised,
    refusal,
)

from neuronserve.config.settings import Settings, parse_settings
from neuronserve.plan import command
from neuronserve.plan.resolution import Resolution
from neuronserve.types import ModelSpec

# --- tool calling in every dialect ----------------------------------------------------------------------

TOOLS_ON_CPU = {"SM_VLLM_MODEL": "org/m"}


def tool_flags(argv: tuple[str, ...]) -> list[str]:
    out = [t for t in argv if t == "--enable-auto-tool-choice"]
    if "--tool-call-parser" in argv:
        out += ["--tool-call-parser", argv[argv.index("--tool-call-parser") + 1]]
    return out


@pytest.mark.parametrize(
    ("env", "extra"),
    [
        ({"SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": "true", "SM_VLLM_TOOL_CALL_PARSER": "hermes"}, ()),
        ({"OPTION_ENABLE_AUTO_TOOL_CHOICE": "true", "OPTION_TOOL_CALL_PARSER": "hermes"}, ()),
        ({"OPTION_ENABLE_AUTO_TOOL_CHOICE": "TRUE", "SM_VLLM_TOOL_CALL_PARSER": "hermes"}, ()),
        ({}, ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")),
    ],
)
def test_tool_calling_reaches_vllm_from_every_dialect(env: dict[str, str], extra: tuple[str, ...]) -> None:
    """LMI's OPTION_ENABLE_AUTO_TOOL_CHOICE / OPTION_TOOL_CALL_PARSER were dropped as unknown settings."""
    for p in (plan({**TOOLS_ON_CPU, **env}, facts(None), extra), llama_plan(env, extra=extra)):
        assert tool_flags(p.argv) == ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
        assert not [w for w in p.warnings if "OPTION_" in w and "unknown" in w]


@pytest.mark.parametrize(
    ("env", "origin"),
    [
        ({"SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": "true"}, "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE"),
        ({"OPTION_ENABLE_AUTO_TOOL_CHOICE": "true"}, "OPTION_ENABLE_AUTO_TOOL_CHOICE"),
    ],
)
def test_auto_tool_choice_without_a_parser_is_refused(env: dict[str, str], origin: str) -> None:
    err = refusal({**TOOLS_ON_CPU, **env}, facts(None))
    assert str(err) == (
        f"{origin}=true needs a tool-call parser (vLLM refuses to start without one): set "
        "SM_VLLM_TOOL_CALL_PARSER to the model's: `llama3_json` for Llama 3.x, `llama4_pythonic` for "
        "Llama 4, `hermes` for Qwen2/Qwen3, `mistral` for Mixtral"
    )
    assert err.variables == (origin, "SM_VLLM_TOOL_CALL_PARSER")


@pytest.mark.parametrize(
    ("env", "extra", "origin"),
    [
        ({"SM_VLLM_TOOL_CALL_PARSER": "mistral"}, (), "SM_VLLM_TOOL_CALL_PARSER"),
        ({"OPTION_TOOL_CALL_PARSER": "mistral"}, (), "OPTION_TOOL_CALL_PARSER"),
        ({}, ("--tool-call-parser=mistral",), "-- --tool-call-parser"),
        (
            {"SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": "false", "SM_VLLM_TOOL_CALL_PARSER": "mistral"},
            (),
            "SM_VLLM_TOOL_CALL_PARSER",
        ),
    ],
)
def test_a_parser_without_auto_tool_choice_is_refused(
    env: dict[str, str], extra: tuple[str, ...], origin: str
) -> None:
    err = refusal({**TOOLS_ON_CPU, **env}, facts(None), extra)
    assert str(err) == (
        f"{origin}=mistral is only used with auto tool choice: set SM_VLLM_ENABLE_AUTO_TOOL_CHOICE=true "
        f"(or OPTION_ENABLE_AUTO_TOOL_CHOICE=true), or unset {origin}"
    )


def test_two_dialects_naming_different_parsers_conflict() -> None:
    env = {
        **TOOLS_ON_CPU,
        "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": "true",
        "SM_VLLM_TOOL_CALL_PARSER": "hermes",
        "OPTION_TOOL_CALL_PARSER": "mistral",
    }
    msg = str(refusal(env, facts(None)))
    assert "SM_VLLM_TOOL_CALL_PARSER" in msg and "OPTION_TOOL_CALL_PARSER" in msg


# --- the command around the lane's flags, called directly ---------------------------------------------


def settings(env: dict[str, str], extra: tuple[str, ...] = ()) -> Settings:
    return parse_settings({"SM_VLLM_MODEL": "org/m", **env}, extra_args=extra)


def test_the_model_argv_ends_at_the_engines_listen_address() -> None:
    s = settings({"NEURONSERVE_ENGINE_PORT": "9001"})
    hub = ModelSpec("hub", "org/m", None, "v2", "SM_VLLM_MODEL")
    host = facts(python="/py", vllm_module="vllm.x")
    assert command.model_argv(s, host, hub) == [
        "/py",
        "-m",
        "vllm.x",
        "--model",
        "org/m",
        "--revision",
        "v2",
        "--host",
        "127.0.0.1",
        "--port",
        "9001",
    ]
    staged = ModelSpec("hub", "org/m", "/w/model", "v2", "SM_VLLM_MODEL")
    assert command.model_argv(s, host, staged)[3:7] == ["--model", "/w/model", "--served-model-name", "org/m"]
    named = settings({"SM_VLLM_SERVED_MODEL_NAME": "mine"})
    assert command.model_argv(named, host, staged)[5:7] == ["--served-model-name", "mine"]


def test_user_flags_are_sorted_and_skip_what_the_plan_renders() -> None:
    s = settings({"SM_VLLM_SWAP_SPACE": "4", "SM_VLLM_DTYPE": "bfloat16", "SM_VLLM_ENFORCE_EAGER": "true"})
    res = Resolution.of(s)
    assert command.user_flags(s, frozenset({"swap-space"}), "neuron", res) == [
        "--dtype",
        "bfloat16",
        "--enforce-eager",
    ]
    assert res.warnings == []


def test_user_flags_on_the_cpu_drop_neuron_flags_and_say_the_listen_address_is_the_plans() -> None:
    s = settings({"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "SM_VLLM_PORT": "1234"})
    res = Resolution.of(s)
    assert command.user_flags(s, frozenset(), "cpu", res) == []
    assert res.warnings == [
        "SM_VLLM_PORT" + command.LISTEN_IGNORED,
        "SM_VLLM_TENSOR_PARALLEL_SIZE is a Neuron setting: dropped for the CPU engine",
    ]


def test_the_tail_keeps_the_users_arguments_less_those_the_plan_decides() -> None:
    res = Resolution.of(settings({}))
    extra = (
        "--model",
        "x",
        "--port=1",
        "--max-num-seqs",
        "9",
        "--enforce-eager",
        "--no-enable-prefix-caching",
        "--seed",
        "3",
    )
    rendered = ["--max-num-seqs", "4", "--enable-prefix-caching"]
    assert command.engine_tail(extra, rendered, res) == ("--enforce-eager", "--seed", "3")
    assert res.warnings == ["-- --port" + command.LISTEN_IGNORED]


@pytest.mark.parametrize("tok", ["--additional-config", "--additional-config={}", "--override-neuron-config"])
def test_an_override_after_the_double_dash_is_refused(tok: str) -> None:
    err = raised(command.refuse_extra_override, ("--seed", "1", tok))
    assert err.variables[0] == tok.split("=", maxsplit=1)[0]


@pytest.mark.parametrize(
    ("extra", "value"),
    [
        ((), None),
        (("--seed", "1"), "1"),
        (("--seed=2",), "2"),
        (("--seed", "1", "--seed=3"), "3"),
        (("--seed",), None),
    ],
)
def test_extra_value_reads_the_last_given_as_argparse_does(extra: tuple[str, ...], value: str | None) -> None:
    assert command.extra_value(extra, "seed") == value


def test_setting_of_names_the_variable_else_the_argument_after_the_double_dash() -> None:
    assert command.setting_of(settings({"SM_VLLM_SEED": "5"}), "seed") == ("5", "SM_VLLM_SEED")
    assert command.setting_of(settings({}, ("--seed", "6")), "seed") == ("6", "-- --seed")
    assert command.setting_of(settings({}), "seed") == (None, "-- --seed")
