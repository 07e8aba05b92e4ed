"""TP x DP against the declared instance type's NeuronCores (plan/fit/cores.py), as `neuronserve plan`
answers it on a laptop (no devices: the instance type alone says how many cores there are)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.builders import SIZED_VERSIONS, facts, model_config, plan, refusal
from tests.unit.plan.test_build_vllm_cli import run_cli

from neuronserve.plan.facts import HostFacts, ModelFacts

LLAMA_DIR = str(Path(__file__).parents[3] / "data" / "models" / "Llama-3.1-8B")
BASE = {"SM_VLLM_MODEL": LLAMA_DIR, "SM_VLLM_MAX_MODEL_LEN": "1024"}


def sized_facts() -> HostFacts:
    """A laptop (no devices) with the Llama-3.1-8B directory, as `neuronserve plan` gathers it."""
    model = ModelFacts("dir", model_config("Llama-3.1-8B"), "d" * 64)
    return facts(
        None, python="py", cores_source="unknown", versions=dict(SIZED_VERSIONS), paths={LLAMA_DIR: model}
    )


@pytest.mark.parametrize(
    ("env", "instance", "message", "variables"),
    [
        (
            {"SM_VLLM_TENSOR_PARALLEL_SIZE": "4"},
            "ml.inf2.xlarge",
            "SM_VLLM_TENSOR_PARALLEL_SIZE=4 needs 4 NeuronCores, but "
            "NEURONSERVE_INSTANCE_TYPE=ml.inf2.xlarge has 2 NeuronCores (1 Inferentia2 chip x 2): set "
            "SM_VLLM_TENSOR_PARALLEL_SIZE to at most 2, or "
            "plan for a larger instance (inf2.24xlarge: 12 NeuronCores)",
            ("SM_VLLM_TENSOR_PARALLEL_SIZE", "NEURONSERVE_INSTANCE_TYPE"),
        ),
        (
            {"SM_VLLM_TENSOR_PARALLEL_SIZE": "64"},
            "trn1.32xlarge",
            "SM_VLLM_TENSOR_PARALLEL_SIZE=64 needs 64 NeuronCores, but "
            "NEURONSERVE_INSTANCE_TYPE=trn1.32xlarge has 32 NeuronCores (16 Trainium chips x 2): set "
            "SM_VLLM_TENSOR_PARALLEL_SIZE to at most 32",
            ("SM_VLLM_TENSOR_PARALLEL_SIZE", "NEURONSERVE_INSTANCE_TYPE"),
        ),
        (
            {"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "NEURONSERVE_DATA_PARALLEL": "4"},
            "inf2.48xlarge",
            "NEURONSERVE_DATA_PARALLEL=4 replicas x SM_VLLM_TENSOR_PARALLEL_SIZE=8 = 32 NeuronCores, but "
            "NEURONSERVE_INSTANCE_TYPE=inf2.48xlarge has 24 NeuronCores (12 Inferentia2 chips x 2): set "
            "NEURONSERVE_DATA_PARALLEL to at most 3",
            ("NEURONSERVE_DATA_PARALLEL", "SM_VLLM_TENSOR_PARALLEL_SIZE", "NEURONSERVE_INSTANCE_TYPE"),
        ),
        (
            {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "NEURON_RT_VISIBLE_CORES": "4-5"},
            "ml.inf2.xlarge",
            "NEURON_RT_VISIBLE_CORES=4-5 names core 4, but NEURONSERVE_INSTANCE_TYPE=ml.inf2.xlarge has 2 "
            "NeuronCores (1 Inferentia2 chip x 2), ids 0 to 1: fix NEURON_RT_VISIBLE_CORES or "
            "NEURONSERVE_INSTANCE_TYPE",
            ("NEURON_RT_VISIBLE_CORES", "NEURONSERVE_INSTANCE_TYPE"),
        ),
    ],
)
def test_more_cores_than_the_instance_has_are_refused(
    env: dict[str, str], instance: str, message: str, variables: tuple[str, ...]
) -> None:
    proc = run_cli(["--device", "neuron", "--instance-type", instance], {**BASE, **env})
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.strip() == f"neuronserve plan: error: {message}"
    err = refusal({**BASE, **env, "NEURONSERVE_INSTANCE_TYPE": instance}, sized_facts(), device="neuron")
    assert str(err) == message and err.variables == variables


def test_the_count_holds_with_the_fit_check_off() -> None:
    env = {**BASE, "SM_VLLM_TENSOR_PARALLEL_SIZE": "4", "NEURONSERVE_FIT_CHECK": "off"}
    err = refusal({**env, "NEURONSERVE_INSTANCE_TYPE": "inf2.xlarge"}, sized_facts(), device="neuron")
    assert "needs 4 NeuronCores" in str(err)


def test_trn2_counts_logical_cores() -> None:
    """trn2.48xlarge: 16 chips x 8 physical cores, 64 logical at LNC 2 (the default) and 128 at LNC 1."""
    env = {**BASE, "NEURONSERVE_INSTANCE_TYPE": "trn2.48xlarge", "SM_VLLM_TENSOR_PARALLEL_SIZE": "128"}
    err = refusal(env, sized_facts(), device="neuron")
    assert str(err).startswith(
        "SM_VLLM_TENSOR_PARALLEL_SIZE=128 needs 128 NeuronCores, but NEURONSERVE_INSTANCE_TYPE=trn2.48xlarge "
        "has 64 NeuronCores (16 Trainium2 chips x 4, LNC 2)"
    )


def test_what_fits_the_instance_plans_within_it() -> None:
    env = {**BASE, "SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "NEURONSERVE_DATA_PARALLEL": "3"}
    p = plan({**env, "NEURONSERVE_INSTANCE_TYPE": "inf2.48xlarge"}, sized_facts(), device="neuron")
    assert [r.cores for r in p.replicas] == ["0-7", "8-15", "16-23"]


def test_an_instance_type_means_a_neuron_plan() -> None:
    """Without --device: the instance type is a Neuron one, so the plan is (and the cores are checked)."""
    proc = run_cli(["--instance-type", "ml.inf2.xlarge"], {**BASE, "SM_VLLM_TENSOR_PARALLEL_SIZE": "4"})
    assert proc.returncode == 2 and "needs 4 NeuronCores" in proc.stderr
    proc = run_cli(
        ["--json"], {**BASE, "SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "NEURONSERVE_INSTANCE_TYPE": "inf2.xlarge"}
    )
    assert proc.returncode == 0 and '"device": "neuron"' in proc.stdout


def test_only_an_explicit_cpu_plans_for_the_cpu_and_says_the_instance_is_dropped() -> None:
    proc = run_cli(["--device", "cpu", "--instance-type", "ml.inf2.xlarge", "--json"], BASE)
    assert proc.returncode == 0 and '"device": "cpu"' in proc.stdout
    assert "NEURONSERVE_INSTANCE_TYPE is a Neuron setting: dropped for the CPU engine" in proc.stdout
    proc = run_cli(["--instance-type", "ml.inf2.xlarge", "--json"], {**BASE, "NEURONSERVE_DEVICE": "CPU"})
    assert proc.returncode == 0 and '"device": "cpu"' in proc.stdout


def test_an_unknown_instance_type_is_refused_first() -> None:
    proc = run_cli([], {**BASE, "NEURONSERVE_INSTANCE_TYPE": "p4d.24xlarge"})
    assert proc.returncode == 2
    assert "NEURONSERVE_INSTANCE_TYPE='p4d.24xlarge' is not a Neuron instance type" in proc.stderr
