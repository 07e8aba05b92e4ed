"""The engine command around what the lane renders (plan/command.py): the model and listen address, the
user's other flags sorted, the arguments after `--` less those the plan decides, an override after `--`
refused, and the tool-calling flags that must come together, from every dialect; called directly and
through build_plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from tests.support.builders import (
    HUB_MODEL,
    facts,
    llama_plan,
    plan,
    raised,
    refusal,
)

from neuronserve.config.settings import Settings, parse_settings
from neuronserve.plan import command
from neuronserve.plan.build import build_plan
from neuronserve.plan.resolution import Resolution
from neuronserve.types import LaunchPlan, ModelSpec

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
def test_a_parser_without_auto_tool_choice_plans_and_is_said(
    env: dict[str, str], extra: tuple[str, ...], origin: str
) -> None:
    """vLLM accepts a parser without --enable-auto-tool-choice: it checks only the reverse (0.11.0
    entrypoints/openai/cli_args.py:276-279, 0.13.0 :292-293) and builds the parser only with auto tool
    choice (0.11.0 serving_chat.py:115-128), answering tool_choice "auto" with a 400 (:205-213). The plan
    refused it; it now passes the parser and says it is unused."""
    p = plan({**TOOLS_ON_CPU, **env}, facts(None), extra)
    assert "--enable-auto-tool-choice" not in p.argv
    assert "--tool-call-parser" in p.argv or "--tool-call-parser=mistral" in p.argv
    assert (
        f'{origin}=mistral is unused without auto tool choice (vLLM answers tool_choice "auto" with a '
        "400): set SM_VLLM_ENABLE_AUTO_TOOL_CHOICE=true (or OPTION_ENABLE_AUTO_TOOL_CHOICE=true) to use it"
    ) in p.warnings


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


def test_host_and_port_settings_are_ignored_with_a_warning() -> None:
    p = plan({**HUB_MODEL, "SM_VLLM_HOST": "0.0.0.0", "SM_VLLM_PORT": "9000", "SM_VLLM_SEED": "7"})
    for var in ("SM_VLLM_HOST", "SM_VLLM_PORT"):
        assert (
            f"{var} ignored: the engine listens on 127.0.0.1:NEURONSERVE_ENGINE_PORT behind the front "
            "server, whose port is SAGEMAKER_BIND_TO_PORT" in p.warnings
        )
    assert p.argv[p.argv.index("--host") + 1] == "127.0.0.1"
    assert p.argv[p.argv.index("--seed") + 1] == "7"  # the flags after them are still passed


def test_a_cpu_hub_model_with_a_revision_passes_it_after_the_model() -> None:
    p = plan({"SM_VLLM_MODEL": "org/m", "SM_VLLM_REVISION": "abc"}, facts(cores=None), device="cpu")
    assert list(p.argv[3:7]) == ["--model", "org/m", "--revision", "abc"]


# --- edge cases found by mutation testing ---------------------------------------------------------


DROPPED = "is a Neuron setting: dropped for the CPU engine"


def cpu_plan(env: Mapping[str, str], extra: Sequence[str] = (), cpus: tuple[int, ...] = ()) -> LaunchPlan:
    """A CPU plan (no Neuron devices) from an environment and the arguments after `--`."""
    return build_plan(parse_settings(env, device="cpu", extra_args=extra), facts(cores=None, cpus=cpus))


def test_a_dropped_neuron_flag_does_not_drop_the_flags_sorted_after_it() -> None:
    """On the CPU a Neuron-only engine flag is dropped with a warning, and every other flag after it in
    name order (num-gpu-blocks-override < seed) still reaches the engine."""
    p = cpu_plan({"SM_VLLM_MODEL": "org/m", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "100", "SM_VLLM_SEED": "7"})
    assert p.warnings == (f"SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE {DROPPED}",)
    assert list(p.argv[-2:]) == ["--seed", "7"]


def test_a_flag_the_neuron_plan_renders_is_not_passed_again_from_after_the_separator() -> None:
    """`-- --no-enable-prefix-caching` on Neuron: the plan reads it and renders the KV layout's own
    `--no-enable-prefix-caching`, so vLLM gets it once (the plan's copy), while the flag after it that
    the plan does not render (`--seed 3`) is passed through as given."""
    p = build_plan(
        parse_settings(HUB_MODEL, extra_args=("--no-enable-prefix-caching", "--seed", "3")), facts()
    )
    assert p.argv.count("--no-enable-prefix-caching") == 1
    assert p.argv.index("--no-enable-prefix-caching") < p.argv.index("--additional-config")
    assert list(p.argv[-2:]) == ["--seed", "3"]


def test_the_cpu_plan_passes_boolean_flags_and_values_after_the_separator_verbatim() -> None:
    """The CPU plan renders no engine flag of its own, so `-- --trust-remote-code` (a flag the plan reads)
    reaches vLLM; and a value is only a value: `mymodel` after `--served-model-name` is not taken for a
    `--model` flag, nor the token after it dropped."""
    extra = ["--trust-remote-code", "--served-model-name", "mymodel", "--seed", "3"]
    p = cpu_plan({"SM_VLLM_MODEL": "org/m"}, extra=extra)
    assert list(p.argv[-5:]) == extra
    assert p.warnings == ()
