"""The Neuron plan (plan/lanes/nxdi/engine.py) names the variable the person actually set, whichever of its
names they used.

The same engine setting can come from SM_VLLM_*, from an LMI `OPTION_*` name, or from the engine
arguments after `--` (`neuronserve serve -- --dtype auto`). A refusal must name that source, or the
person is told to change a variable they never set. Each row sets a setting through the other name
and reads the whole message. (Added where mutation testing showed that the names neuron_engine passes
to the rules were unchecked: docs/TESTING.md.) The later steps: test_engine_late_steps.py.
"""

from __future__ import annotations

import pytest
from tests.support.builders import facts, plan, refusal

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.plan.build import build_plan

BASE = {
    "SM_VLLM_MODEL": "org/m",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    "SM_VLLM_MAX_MODEL_LEN": "2048",
    "SM_VLLM_MAX_NUM_SEQS": "4",
}
LOADER = (
    "the plugin merges the override over its own value (vllm-neuron 0.2.2+lts "
    "worker/neuronx_distributed_model_loader.py:880), so the compiled "
    "graph and vLLM would disagree"
)
EAGLE = '{"model": "d", "num_speculative_tokens": 3, "method": "eagle"}'


@pytest.mark.parametrize(
    ("env", "args", "var"),
    [
        ({"SM_VLLM_DTYPE": "auto"}, (), "SM_VLLM_DTYPE"),
        ({"OPTION_DTYPE": "auto"}, (), "OPTION_DTYPE"),
        ({}, ("--dtype", "auto"), "-- --dtype"),
    ],
)
def test_dtype_auto_is_refused_naming_where_it_was_set(
    env: dict[str, str], args: tuple[str, ...], var: str
) -> None:
    err = refusal({**BASE, **env}, extra=args)
    assert (
        str(err)
        == f"{var}=auto compiles float32 on Neuron: set {var}=bfloat16 (or float16/float32 explicitly)"
    )
    assert err.variables == (var,)


@pytest.mark.parametrize(
    ("env", "args", "var"),
    [
        ({"SM_VLLM_SPECULATIVE_CONFIG": "{bad"}, (), "SM_VLLM_SPECULATIVE_CONFIG"),
        ({}, ("--speculative-config", "{bad"), "-- --speculative-config"),
    ],
)
def test_a_speculative_config_that_is_no_json_object_names_its_source(
    env: dict[str, str], args: tuple[str, ...], var: str
) -> None:
    err = refusal({**BASE, **env}, extra=args)
    assert (str(err), err.variables) == (f"{var} must be a JSON object", (var,))


# (override variable and value, engine arguments, the launch value and the setting it comes from)
LAUNCH = [
    (
        "SM_NEURON_TP_DEGREE",
        "4",
        ("--tensor-parallel-size", "2"),
        "tp_degree=2",
        "-- --tensor-parallel-size=2",
    ),
    ("SM_NEURON_SEQ_LEN", "4", ("--max-model-len", "2048"), "seq_len=2048", "-- --max-model-len=2048"),
    ("SM_NEURON_BATCH_SIZE", "2", ("--max-num-seqs", "4"), "batch_size=4", "-- --max-num-seqs=4"),
    (
        "SM_NEURON_IS_CONTINUOUS_BATCHING",
        "false",
        ("--max-num-seqs", "4"),
        "is_continuous_batching=true",
        "-- --max-num-seqs=4",
    ),
    ("SM_NEURON_TORCH_DTYPE", "float32", ("--dtype", "float16"), "torch_dtype=float16", "-- --dtype=float16"),
    ("SM_NEURON_TORCH_DTYPE", "float32", (), "torch_dtype=bfloat16", "SM_VLLM_DTYPE=bfloat16"),
    (
        "SM_NEURON_ENABLE_FUSED_SPECULATION",
        "true",
        (),
        "enable_fused_speculation=false",
        "SM_VLLM_SPECULATIVE_CONFIG=unset",
    ),
    (
        "SM_NEURON_ENABLE_FUSED_SPECULATION",
        "false",
        ("--speculative-config", EAGLE),
        "enable_fused_speculation=true",
        "-- --speculative-config=set",
    ),
    (
        "SM_NEURON_SPECULATION_LENGTH",
        "2",
        ("--speculative-config", EAGLE),
        "speculation_length=3",
        "-- --speculative-config=num_speculative_tokens",
    ),
    (
        "SM_NEURON_SPECULATION_LENGTH",
        "2",
        (),
        "speculation_length=0",
        "SM_VLLM_SPECULATIVE_CONFIG=num_speculative_tokens",
    ),
    (
        "SM_NEURON_ENABLE_EAGLE_SPECULATION",
        "false",
        ("--speculative-config", EAGLE),
        "enable_eagle_speculation=true",
        "-- --speculative-config=method",
    ),
]
# (A draft with no EAGLE method, where the launch gives enable_eagle_speculation=false, is refused before
# this rule: vLLM refuses a plain draft model, plan/lanes/nxdi/speculation.py.)


@pytest.mark.parametrize(("var", "value", "args", "launch", "setting"), LAUNCH)
def test_an_override_that_disagrees_with_the_launch_names_the_setting_as_given(
    var: str, value: str, args: tuple[str, ...], launch: str, setting: str
) -> None:
    err = refusal({**BASE, var: value}, extra=args)
    key = launch.split("=", maxsplit=1)[0]
    name = setting.split("=", maxsplit=1)[0]
    assert str(err).startswith(f"{var} sets {key}=")
    assert str(err).endswith(
        f" but the launch gives {launch} ({setting}); {LOADER}: remove {var}, or change {name} instead"
    )
    assert err.variables == (var, name)


def test_logical_nc_config_disagreeing_with_the_override_names_both() -> None:
    err = refusal({**BASE, "NEURON_LOGICAL_NC_CONFIG": "2", "SM_NEURON_LOGICAL_NC_CONFIG": "1"})
    assert str(err) == "NEURON_LOGICAL_NC_CONFIG=2 and override logical_nc_config=1 disagree: set one of them"
    assert err.variables == ("NEURON_LOGICAL_NC_CONFIG", "SM_NEURON_LOGICAL_NC_CONFIG")


def test_logical_nc_config_reaches_the_override_and_agreement_passes() -> None:
    p = plan({**BASE, "NEURON_LOGICAL_NC_CONFIG": "2"})
    assert p.neuron_override == {"logical_nc_config": 2}
    p = plan({**BASE, "NEURON_LOGICAL_NC_CONFIG": "1", "SM_NEURON_LOGICAL_NC_CONFIG": "1"})
    assert p.neuron_override == {"logical_nc_config": 1}


@pytest.mark.parametrize(
    ("length", "warned"), [("256", True), ("480", True), ("512", False), ("1024", False)]
)
def test_prefix_caching_below_the_smallest_prefix_bucket_is_said(length: str, warned: bool) -> None:
    p = plan({**BASE, "SM_VLLM_ENABLE_PREFIX_CACHING": "true", "SM_VLLM_MAX_MODEL_LEN": length})
    said = [w for w in p.warnings if w.startswith("prefix caching with max_model_len")]
    if warned:
        assert said == [
            f"prefix caching with max_model_len {length} < 512: NxD Inference's smallest prefix-caching "
            "prefill bucket is 512; if the compile fails, set SM_VLLM_MAX_MODEL_LEN=512 or more"
        ]
    else:
        assert said == []


def test_a_context_bucket_override_stands_in_for_the_prefix_floor() -> None:
    p = plan(
        {
            **BASE,
            "SM_VLLM_ENABLE_PREFIX_CACHING": "true",
            "SM_VLLM_MAX_MODEL_LEN": "256",
            "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[256]",
            "SM_NEURON_PREFIX_BUCKETS": "[256]",
        }
    )
    assert not [w for w in p.warnings if w.startswith("prefix caching with max_model_len")]


def test_an_integer_that_is_not_names_the_engine_argument() -> None:
    env = {k: v for k, v in BASE.items() if k != "SM_VLLM_MAX_MODEL_LEN"}
    with pytest.raises(ConfigError) as err:
        build_plan(parse_settings(env, extra_args=("--max-model-len", "12k")), facts())
    assert (str(err.value), err.value.variables) == (
        "-- --max-model-len='12k' must be a positive integer",
        ("-- --max-model-len",),
    )


def test_true_is_no_integer_and_false_means_unset() -> None:
    err = refusal({**BASE, "SM_VLLM_MAX_NUM_SEQS": "true"})
    assert (str(err), err.variables) == (
        "SM_VLLM_MAX_NUM_SEQS=True must be a positive integer",
        ("SM_VLLM_MAX_NUM_SEQS",),
    )
    p = plan({**BASE, "SM_VLLM_MAX_NUM_SEQS": "false"})
    assert p.argv[p.argv.index("--max-num-seqs") + 1] == "8"
    assert "max_num_seqs defaulted to 8 (the compiled batch size): set SM_VLLM_MAX_NUM_SEQS" in p.warnings


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        ("0", "SM_VLLM_TENSOR_PARALLEL_SIZE=0: tensor parallel size must be at least 1"),
        (
            "64",
            "SM_VLLM_TENSOR_PARALLEL_SIZE=64 exceeds the 32 visible NeuronCores (test): set "
            "SM_VLLM_TENSOR_PARALLEL_SIZE=32 or fewer, or run on an instance with more cores",
        ),
    ],
)
def test_a_tensor_parallel_size_outside_the_cores_is_refused(tp: str, message: str) -> None:
    err = refusal({**BASE, "SM_VLLM_TENSOR_PARALLEL_SIZE": tp})
    assert (str(err), err.variables) == (message, ("SM_VLLM_TENSOR_PARALLEL_SIZE",))


@pytest.mark.parametrize(("tp", "cores"), [("1", "0"), ("2", "0-1"), ("8", "0-7")])
def test_visible_cores_default_to_the_first_tp_cores(tp: str, cores: str) -> None:
    assert plan({**BASE, "SM_VLLM_TENSOR_PARALLEL_SIZE": tp}).env["NEURON_RT_VISIBLE_CORES"] == cores


@pytest.mark.parametrize(
    ("seqs", "value", "launch"),
    [("1", "true", "is_continuous_batching=false"), ("2", "false", "is_continuous_batching=true")],
)
def test_continuous_batching_starts_at_two_sequences(seqs: str, value: str, launch: str) -> None:
    err = refusal({**BASE, "SM_VLLM_MAX_NUM_SEQS": seqs, "SM_NEURON_IS_CONTINUOUS_BATCHING": value})
    assert f"but the launch gives {launch} (SM_VLLM_MAX_NUM_SEQS={seqs})" in str(err)
    assert plan(
        {**BASE, "SM_VLLM_MAX_NUM_SEQS": seqs, "SM_NEURON_IS_CONTINUOUS_BATCHING": launch.split("=")[1]}
    )
