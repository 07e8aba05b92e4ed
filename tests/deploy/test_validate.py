"""The one validation every deploy path runs (deploy/validate.py): the container's plan on the instance,
both instance spellings, the target's own variables, and what the plan is given in place of this host."""

from __future__ import annotations

import pytest

from neuronserve.deploy.validate import (
    ECS,
    EKS,
    SAGEMAKER,
    cores_used,
    instance_name,
    max_num_seqs,
    plan_check,
    tensor_parallel,
)
from neuronserve.errors import ConfigError

MODEL = {"HF_MODEL_ID": "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "SM_VLLM_MAX_MODEL_LEN": "2048"}


@pytest.mark.parametrize("raw", ["inf2.xlarge", "ml.inf2.xlarge", " ML.INF2.XLARGE "])
def test_both_instance_spellings_in_each_targets_spelling(raw: str) -> None:
    assert instance_name(raw, SAGEMAKER) == "ml.inf2.xlarge"
    assert instance_name(raw, ECS) == instance_name(raw, EKS) == "inf2.xlarge"


def test_an_unknown_instance_names_the_known_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"not a Neuron instance type; use one of inf2\.xlarge, .*trn2\.48xlarge"
    ):
        instance_name("g5.xlarge", ECS)


@pytest.mark.parametrize(
    ("instance", "env", "cores", "tp", "used"),
    [
        ("inf2.xlarge", {}, 2, 2, 2),  # TP defaults to every visible core
        ("inf2.48xlarge", {"SM_VLLM_TENSOR_PARALLEL_SIZE": "8"}, 24, 8, 8),
        ("inf2.48xlarge", {"SM_VLLM_TENSOR_PARALLEL_SIZE": "8", "NEURONSERVE_DATA_PARALLEL": "3"}, 24, 8, 24),
        ("trn1.32xlarge", {"SM_VLLM_TENSOR_PARALLEL_SIZE": "32"}, 32, 32, 32),
        ("trn2.48xlarge", {"SM_VLLM_TENSOR_PARALLEL_SIZE": "64"}, 64, 64, 64),  # LNC 2: 128 physical / 2
        ("trn2.48xlarge", {"SM_VLLM_TENSOR_PARALLEL_SIZE": "4", "NEURON_LOGICAL_NC_CONFIG": "1"}, 128, 4, 4),
    ],
)
def test_the_plan_sees_the_instances_cores(
    instance: str, env: dict[str, str], cores: int, tp: int, used: int
) -> None:
    checked = plan_check({**MODEL, **env}, instance, ECS)
    assert checked.visible_cores == cores
    assert (tensor_parallel(checked.plan), cores_used(checked.plan)) == (tp, used)
    assert checked.plan.device == "neuron"


def test_visible_cores_narrow_what_the_plan_may_use() -> None:
    checked = plan_check(MODEL, "inf2.48xlarge", EKS, visible_cores=4)
    assert checked.visible_cores == 4 and tensor_parallel(checked.plan) == 4
    assert max_num_seqs(checked.plan) == 8  # the plan's default compiled batch, said in a warning
    assert any("max_num_seqs defaulted to 8" in w for w in checked.warnings)


def test_refusals_say_the_instance_and_hide_secret_values() -> None:
    env = {**MODEL, "SM_VLLM_TENSOR_PARALLEL_SIZE": "4", "SM_VLLM_API_KEY": "sk-0123456789abcdef"}
    with pytest.raises(ConfigError) as err:
        plan_check(env, "ml.inf2.xlarge", SAGEMAKER)
    text = str(err.value)
    assert text.startswith("the container would refuse this environment on ml.inf2.xlarge: ")
    assert "has 2 NeuronCores" in text and "SM_VLLM_TENSOR_PARALLEL_SIZE" in err.value.variables


@pytest.mark.parametrize(
    ("target", "hint"),
    [
        (SAGEMAKER, "pass --model-data"),
        (ECS, "this task mounts no model there"),
        (EKS, "these pods mount no model there"),
    ],
)
def test_no_model_says_where_it_would_come_from(target: str, hint: str) -> None:
    with pytest.raises(ConfigError, match="no model configured") as err:
        plan_check({}, "inf2.xlarge", target)  # type: ignore[arg-type]
    assert hint in str(err.value) and "/nonexistent" not in str(err.value)


def test_sagemaker_model_data_fills_opt_ml_model() -> None:
    checked = plan_check({"SM_VLLM_MAX_MODEL_LEN": "2048"}, "inf2.xlarge", SAGEMAKER, model_mounted=True)
    assert (checked.plan.model.source, checked.plan.model.local_path) == ("sagemaker", "/opt/ml/model")


def test_a_model_path_is_the_containers_not_this_hosts() -> None:
    """A path in SM_VLLM_MODEL is read inside the container: planned in place, never looked up here."""
    checked = plan_check({**MODEL, "SM_VLLM_MODEL": "/models/llama"}, "inf2.xlarge", ECS)
    assert (checked.plan.model.source, checked.plan.model.local_path) == ("local", "/models/llama")


@pytest.mark.parametrize(
    "name", ["NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURONSERVE_INSTANCE_TYPE"]
)
def test_eks_owns_the_core_list(name: str) -> None:
    env = {**MODEL, name: "2"}
    with pytest.raises(ConfigError, match=f"{name}: set by EKS for each pod"):
        plan_check(env, "inf2.xlarge", EKS)
    assert plan_check({**MODEL, "NEURON_RT_NUM_CORES": "2"}, "inf2.xlarge", ECS).plan.device == "neuron"


def test_lnc_on_inferentia_is_refused_by_the_instance_table() -> None:
    with pytest.raises(ConfigError, match="applies to Trn2 only"):
        plan_check({**MODEL, "NEURON_LOGICAL_NC_CONFIG": "2"}, "inf2.xlarge", ECS)
    with pytest.raises(ConfigError, match="must be 1 or 2"):
        plan_check({**MODEL, "NEURON_LOGICAL_NC_CONFIG": "two"}, "trn2.48xlarge", ECS)
