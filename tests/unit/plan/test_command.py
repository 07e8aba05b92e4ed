"""The engine command around what the lane renders (plan/command.py): the tool-calling flags that must
come together, from every dialect.
"""

from __future__ import annotations

import pytest
from tests.support.builders import (
    facts,
    llama_plan,
    plan,
    refusal,
)

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
