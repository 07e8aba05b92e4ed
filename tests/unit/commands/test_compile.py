"""`neuronserve compile`'s refusals, in process through the command line (cli.main): nothing to compile
(a CPU plan) or nowhere to push (no remote cache, a read-only one) is exit 2 naming the variable,
before any S3 or engine work; a required cache hit is dropped, not obeyed. The runs themselves (a
miss, a hit, retries, SIGTERM) are tests/integration/commands/test_compile.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.host_files import LLAMA, write_model

from neuronserve.cli import main
from neuronserve.commands.compile import for_compile
from neuronserve.launchplan import resolve_plan


@pytest.fixture(autouse=True)
def root_logging() -> Iterator[None]:
    """The command configures the root logger on this test's stdout (logsetup.setup): put it back."""
    handlers, level = logging.root.handlers[:], logging.root.level
    yield
    logging.root.handlers[:] = handlers
    logging.root.setLevel(level)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "SM_VLLM_MODEL": str(write_model(tmp_path / "m", LLAMA)),
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "1",
        "NEURON_RT_VISIBLE_CORES": "0",
        "NEURONSERVE_WORK_DIR": str(tmp_path / "work"),
    }


@pytest.mark.parametrize(
    ("extra", "args", "named"),
    [
        ({}, ["--device", "neuron"], "NEURONSERVE_CACHE_URI"),
        ({"NEURONSERVE_CACHE_URI": "s3://b/c"}, ["--device", "cpu"], "NEURONSERVE_DEVICE"),
        (
            {"NEURONSERVE_CACHE_URI": "s3://b/c", "NEURONSERVE_CACHE_READ_ONLY": "true"},
            ["--device", "neuron"],
            "NEURONSERVE_CACHE_READ_ONLY",
        ),
        (
            {"NEURONSERVE_CACHE_URI": "s3://b/c", "NEURONSERVE_COMPILE_RETRIES": "x"},
            ["--device", "neuron"],
            "NEURONSERVE_COMPILE_RETRIES",
        ),
        (
            {"NEURONSERVE_CACHE_URI": "s3://b/c", "NEURONSERVE_COMPILE_RETRIES": "11"},
            ["--device", "neuron"],
            "NEURONSERVE_COMPILE_RETRIES",
        ),
    ],
)
def test_nothing_to_compile_or_nowhere_to_push_is_exit_2_naming_the_variable(
    env: dict[str, str],
    extra: dict[str, str],
    args: list[str],
    named: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compile", *args], {**env, **extra}) == 2
    err = capsys.readouterr().err
    assert err.startswith("neuronserve compile: error: ") and named in err
    assert "Traceback" not in err


def test_a_required_cache_hit_is_dropped_for_the_compile(env: dict[str, str]) -> None:
    plan = resolve_plan(
        {**env, "NEURONSERVE_CACHE_URI": "s3://b/c", "NEURONSERVE_REQUIRE_CACHE_HIT": "true"}, device="neuron"
    )
    assert plan.artifacts.require_hit
    compiled = for_compile(plan)
    assert not compiled.artifacts.require_hit
    assert compiled.artifacts.remote_uri == plan.artifacts.remote_uri == f"s3://b/c/{plan.cache_key}/"
    assert compiled.argv == plan.argv and compiled.cache_key == plan.cache_key  # the same plan otherwise
