"""The launch steps tp and model_len (plan/lanes/nxdi/launch.py), their refusals and warnings word for
word: max_model_len and TP, derived or given (added where mutation testing showed them unchecked:
docs/TESTING.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import facts, plan, refusal

from neuronserve.plan.facts import ModelFacts

BASE = {"SM_VLLM_MODEL": "/models/m", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "SM_VLLM_MAX_NUM_SEQS": "4"}
HEADS = {"architectures": ["LlamaForCausalLM"], "num_key_value_heads": 8, "head_dim": 64}


def with_config(config: dict[str, Any] | None, **kw: Any) -> Any:
    return facts(paths={"/models/m": ModelFacts(kind="dir", config=config)}, **kw)


@pytest.mark.parametrize(
    "config",
    [{**HEADS, "max_position_embeddings": 2048}, {**HEADS, "text_config": {"max_position_embeddings": 2048}}],
)
def test_max_model_len_derived_from_config_json_is_said(config: dict[str, Any]) -> None:
    p = plan(BASE, with_config(config))
    assert p.argv[p.argv.index("--max-model-len") + 1] == "2048"
    assert (
        "max_model_len derived from /models/m/config.json max_position_embeddings = 2048; set "
        "SM_VLLM_MAX_MODEL_LEN to compile for a shorter length (faster, less memory)" in p.warnings
    )


@pytest.mark.parametrize(
    "config",
    [None, {**HEADS}, {**HEADS, "max_position_embeddings": 0}, {**HEADS, "max_position_embeddings": True}],
)
def test_max_model_len_without_a_way_to_derive_it_is_refused(config: dict[str, Any] | None) -> None:
    err = refusal(BASE, with_config(config))
    assert str(err) == (
        "max_model_len is required on Neuron (the plugin compiles one fixed length and does not derive it) "
        "and /models/m has no local config.json to derive it from: set SM_VLLM_MAX_MODEL_LEN (e.g. 4096)"
    )
    assert err.variables == ("SM_VLLM_MAX_MODEL_LEN",)


@pytest.mark.parametrize(
    ("key", "var"),
    [("SM_VLLM_MAX_MODEL_LEN", "SM_VLLM_MAX_MODEL_LEN"), ("SM_VLLM_MAX_NUM_SEQS", "SM_VLLM_MAX_NUM_SEQS")],
)
def test_integers_that_are_not_are_refused_by_name(key: str, var: str) -> None:
    err = refusal({**BASE, "SM_VLLM_MAX_MODEL_LEN": "1024", key: "12k"}, with_config(HEADS))
    assert (str(err), err.variables) == (f"{var}='12k' must be a positive integer", (var,))


@pytest.mark.parametrize("tp", [None, "max", "MAX"])
def test_tp_defaults_to_every_visible_core_and_says_so(tp: str | None) -> None:
    env = {k: v for k, v in BASE.items() if k != "SM_VLLM_TENSOR_PARALLEL_SIZE"} | {
        "SM_VLLM_MAX_MODEL_LEN": "1024"
    }
    if tp is not None:
        env["SM_VLLM_TENSOR_PARALLEL_SIZE"] = tp
    p = plan(env, with_config(HEADS, cores=4, cores_source="neuron-ls"))
    assert p.argv[p.argv.index("--tensor-parallel-size") + 1] == "4"
    assert "tensor_parallel_size set to all 4 visible NeuronCores (neuron-ls)" in p.warnings


def test_tp_unknown_cores_and_no_tp_is_refused() -> None:
    env = {"SM_VLLM_MODEL": "/models/m", "SM_VLLM_MAX_MODEL_LEN": "1024", "NEURONSERVE_DEVICE": "neuron"}
    err = refusal(env, with_config(HEADS, cores=None, neuron_devices=1))
    assert str(err) == (
        "cannot tell how many NeuronCores are visible (no /dev/neuron*, no NEURON_RT_VISIBLE_CORES): set "
        "SM_VLLM_TENSOR_PARALLEL_SIZE (e.g. 2) or NEURON_RT_VISIBLE_CORES (e.g. 0-1), or name the instance "
        "(NEURONSERVE_INSTANCE_TYPE, `plan --instance-type`, e.g. ml.inf2.xlarge)"
    )
    assert err.variables == (
        "SM_VLLM_TENSOR_PARALLEL_SIZE",
        "NEURON_RT_VISIBLE_CORES",
        "NEURONSERVE_INSTANCE_TYPE",
    )
    # The fix it names works: the instance alone plans every core of it.
    p = plan(
        {**env, "NEURONSERVE_INSTANCE_TYPE": "ml.inf2.xlarge"},
        with_config(HEADS, cores=None, neuron_devices=1),
    )
    assert p.argv[p.argv.index("--tensor-parallel-size") + 1] == "2"


def test_a_tp_that_cannot_be_checked_is_said_so() -> None:
    env = {**BASE, "SM_VLLM_MAX_MODEL_LEN": "1024", "NEURONSERVE_DEVICE": "neuron"}
    p = plan(env, with_config(HEADS, cores=None, neuron_devices=1))
    assert (
        "SM_VLLM_TENSOR_PARALLEL_SIZE=2 not checked against the visible NeuronCores (none found on this host)"
        in p.warnings
    )
    checked = plan({**BASE, "SM_VLLM_MAX_MODEL_LEN": "1024"}, with_config(HEADS))
    assert not [w for w in checked.warnings if "not checked against" in w]
