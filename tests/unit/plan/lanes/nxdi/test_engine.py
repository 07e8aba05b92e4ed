"""The Neuron plan names the variable the person actually set, whichever of its names they used.

The same engine setting can come from SM_VLLM_*, from an LMI `OPTION_*` name, or from the engine
arguments after `--` (`neuronserve serve -- --dtype auto`). A refusal must name that source, or the
person is told to change a variable they never set. Each row sets a setting through the other name
and reads the whole message. (Added where mutation testing showed that the names neuron_engine passes
to the rules were unchecked: docs/TESTING.md.)
"""

from __future__ import annotations

import pytest
from tests.support.builders import facts, plan, refusal

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import ModelFacts
from neuronserve.plan.lanes.nxdi.engine import neuron_engine
from neuronserve.plan.resolution import Resolution

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
    (
        "SM_NEURON_ENABLE_EAGLE_SPECULATION",
        "true",
        ("--speculative-config", '{"model": "d", "num_speculative_tokens": 3}'),
        "enable_eagle_speculation=false",
        "-- --speculative-config=method",
    ),
]


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


CHUNKED = {
    "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
    "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 4}',
}


def test_chunked_prefill_chooses_the_chunk_and_says_so() -> None:
    p = plan({**BASE, **CHUNKED})
    assert p.argv[p.argv.index("--max-num-batched-tokens") + 1] == "2048"
    assert (
        "max_num_batched_tokens (the compiled prefill chunk) set to 2048: set SM_VLLM_MAX_NUM_BATCHED_TOKENS "
        "to choose it" in p.warnings
    )
    assert p.env["DISABLE_NEURON_CUSTOM_SCHEDULER"] == "1"
    assert "DISABLE_NEURON_CUSTOM_SCHEDULER" not in plan(BASE).env


@pytest.mark.parametrize("tokens", ["3", "4096"])
def test_a_chunk_outside_max_num_seqs_and_max_model_len_is_refused(tokens: str) -> None:
    err = refusal({**BASE, **CHUNKED, "SM_VLLM_MAX_NUM_BATCHED_TOKENS": tokens})
    assert str(err) == (
        f"SM_VLLM_MAX_NUM_BATCHED_TOKENS={tokens}: with chunked prefill it is the compiled chunk length and "
        "must be between max_num_seqs 4 and max_model_len 2048: set SM_VLLM_MAX_NUM_BATCHED_TOKENS=2048"
    )
    assert err.variables == ("SM_VLLM_MAX_NUM_BATCHED_TOKENS",)


@pytest.mark.parametrize("tokens", ["4", "2048"])
def test_a_chunk_at_either_end_is_compiled(tokens: str) -> None:
    p = plan({**BASE, **CHUNKED, "SM_VLLM_MAX_NUM_BATCHED_TOKENS": tokens})
    assert p.argv[p.argv.index("--max-num-batched-tokens") + 1] == tokens
    assert not [w for w in p.warnings if w.startswith("max_num_batched_tokens")]


def test_a_max_context_length_override_must_agree_with_the_chunk() -> None:
    err = refusal({**BASE, **CHUNKED, "SM_NEURON_MAX_CONTEXT_LENGTH": "1024"})
    assert "but the launch gives max_context_length=2048 (SM_VLLM_MAX_NUM_BATCHED_TOKENS=2048)" in str(err)
    assert err.variables == ("SM_NEURON_MAX_CONTEXT_LENGTH", "SM_VLLM_MAX_NUM_BATCHED_TOKENS")


def test_max_context_length_in_the_override_json_is_named_by_it() -> None:
    err = refusal({**BASE, "SM_VLLM_OVERRIDE_NEURON_CONFIG": '{"max_context_length": 4096}'})
    assert str(err) == "SM_VLLM_OVERRIDE_NEURON_CONFIG=4096 must be a positive integer <= max_model_len 2048"
    assert err.variables == ("SM_VLLM_OVERRIDE_NEURON_CONFIG", "SM_VLLM_MAX_MODEL_LEN")


def test_a_max_context_length_of_one_token_is_allowed_and_said() -> None:
    p = plan({**BASE, "SM_NEURON_MAX_CONTEXT_LENGTH": "1"})
    said = "SM_NEURON_MAX_CONTEXT_LENGTH=1: prompts longer than 1 tokens"
    assert any(w.startswith(said) for w in p.warnings)


def test_engine_json_is_rendered_with_sorted_keys() -> None:
    """One configuration renders one argv whatever order its JSON came in (the cache key's argv)."""
    p = plan(
        {
            **BASE,
            "SM_VLLM_ADDITIONAL_CONFIG": '{"skip_warmup": true}',
            "SM_VLLM_OVERRIDE_NEURON_CONFIG": '{"sequence_parallel_enabled": false, "async_mode": false}',
        }
    )
    assert list(p.argv[-2:]) == [
        "--additional-config",
        '{"override_neuron_config":{"async_mode":false,"sequence_parallel_enabled":false},"skip_warmup":true}',
    ]
    p = plan(
        {
            **BASE,
            "NEURONSERVE_INTEGRATION": "in-tree",
            "SM_VLLM_OVERRIDE_NEURON_CONFIG": '{"sequence_parallel_enabled": false, "async_mode": false}',
        },
        facts(versions={"vllm": "0.10.2"}),
    )
    assert list(p.argv[-2:]) == [
        "--override-neuron-config",
        '{"async_mode":false,"sequence_parallel_enabled":false}',
    ]
    assert p.env["VLLM_NEURON_FRAMEWORK"] == "neuronx-distributed-inference"


TNX = {"NEURONSERVE_INTEGRATION": "in-tree", "VLLM_NEURON_FRAMEWORK": "transformers-neuronx"}
IN_TREE = facts(versions={"vllm": "0.10.2"})  # in-tree needs vLLM's Neuron device (refused on 0.11)


def test_transformers_neuronx_needs_one_block_per_sequence() -> None:
    err = refusal({**BASE, **TNX, "SM_VLLM_BLOCK_SIZE": "32"}, IN_TREE)
    assert str(err) == (
        "SM_VLLM_BLOCK_SIZE=32: transformers-neuronx needs block_size == max_model_len: "
        "set SM_VLLM_BLOCK_SIZE=2048 or unset it"
    )
    assert err.variables == ("SM_VLLM_BLOCK_SIZE", "SM_VLLM_MAX_MODEL_LEN")
    p = plan(
        {**BASE, **TNX, "SM_VLLM_BLOCK_SIZE": "2048", "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[512,1024]"},
        IN_TREE,
    )
    assert p.argv[p.argv.index("--block-size") + 1] == "2048"
    assert p.env["VLLM_NEURON_FRAMEWORK"] == "transformers-neuronx"
    assert p.env["NEURON_CONTEXT_LENGTH_BUCKETS"] == "512,1024"


def test_the_compiled_graph_record_names_every_input() -> None:
    """engine.graph is what the cache key hashes: one entry per input that changes the compiled graph.

    Renaming or dropping an entry silently changes (or stops distinguishing) every cache key, so the
    record of one full configuration is pinned: an EAGLE draft identified by its content, compiler
    flags, logical NeuronCores, quantization.
    """
    env = {
        **BASE,
        "SM_VLLM_SPECULATIVE_CONFIG": '{"model": "/d", "num_speculative_tokens": 3, "method": "eagle"}',
        "NEURON_CC_FLAGS": "-O1",
        "NEURON_LOGICAL_NC_CONFIG": "2",
        "SM_NEURON_QUANTIZED": "true",
        "SM_VLLM_ADDITIONAL_CONFIG": '{"skip_warmup": true}',
    }
    draft = ModelFacts(
        kind="dir",
        config={"architectures": ["LlamaForCausalLM"]},
        config_sha256="c0ffee",
        weights_digest="beef",
        has_lm_head=True,
    )
    settings = parse_settings(env)
    engine = neuron_engine(settings, facts(paths={"/d": draft}), "org/m", None, Resolution.of(settings))
    assert engine.graph == {
        "integration": "plugin",
        "framework": None,
        "tp": 2,
        "max_model_len": 2048,
        "max_num_seqs": 4,
        "dtype": "bfloat16",
        "kv": {"kv_tokens": 8192, "mode": "contiguous"},
        "chunked_prefill": False,
        "max_num_batched_tokens": None,
        "override": {"logical_nc_config": 2, "quantized": True},
        "additional_config": {"skip_warmup": True},
        "neuron_cc_flags": "-O1",
        "speculative_config": '{"method": "eagle", "model": "/d", "num_speculative_tokens": 3}',
        "draft": {"config_sha256": "c0ffee", "weights": "beef"},
        "lora": False,
        "quantization": None,  # vLLM's --quantization is refused on the plugin (plan/lanes/nxdi/guards.py)
        "logical_nc_config": "2",
        # no instance type and no neuron-ls count: the generation is unknown, the LNC is not
        "neuron_target": {"generation": None, "target": None, "logical_nc_config": 2},
    }
    settings = parse_settings({**BASE, **CHUNKED})
    chunked = neuron_engine(settings, facts(), "org/m", None, Resolution.of(settings))
    assert (chunked.graph["chunked_prefill"], chunked.graph["max_num_batched_tokens"]) == (True, 2048)


@pytest.mark.parametrize("value", ["x", "0", "-1", "1.5"])
def test_a_logical_nc_config_that_is_no_positive_integer_is_refused(value: str) -> None:
    """It used to reach the compiled override as logical_nc_config 0 (found by mutation testing)."""
    err = refusal({**BASE, "NEURON_LOGICAL_NC_CONFIG": value})
    assert str(err) == (
        f"NEURON_LOGICAL_NC_CONFIG={value!r} must be a positive integer (physical NeuronCores per logical "
        "core: 1, or 2 on Trn2)"
    )
    assert err.variables == ("NEURON_LOGICAL_NC_CONFIG",)


def test_a_framework_the_plugin_ignores_is_said() -> None:
    p = plan({**BASE, "VLLM_NEURON_FRAMEWORK": "transformers-neuronx"})
    assert (
        "VLLM_NEURON_FRAMEWORK=transformers-neuronx is read only by vLLM's in-tree Neuron support "
        "(0.9/0.10); "
        "the vllm-neuron plugin ignores it (set NEURONSERVE_INTEGRATION=in-tree)" in p.warnings
    )
    assert "VLLM_NEURON_FRAMEWORK" not in p.env


def test_transformers_neuronx_refuses_prefix_caching_by_its_name() -> None:
    err = refusal({**BASE, **TNX, "SM_VLLM_ENABLE_PREFIX_CACHING": "true"}, IN_TREE)
    assert str(err) == (
        "SM_VLLM_ENABLE_PREFIX_CACHING: transformers-neuronx has no prefix caching: "
        "unset SM_VLLM_ENABLE_PREFIX_CACHING"
    )
    assert err.variables == ("SM_VLLM_ENABLE_PREFIX_CACHING",)


def test_the_smallest_derivable_model_length_is_one_token() -> None:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "num_key_value_heads": 8,
        "head_dim": 64,
        "max_position_embeddings": 1,
    }
    env = {"SM_VLLM_MODEL": "/models/m", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "SM_VLLM_MAX_NUM_SEQS": "1"}
    p = build_plan(parse_settings(env), facts(paths={"/models/m": ModelFacts(kind="dir", config=config)}))
    assert p.argv[p.argv.index("--max-model-len") + 1] == "1"


SP = {
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "3",
    "SM_VLLM_MAX_MODEL_LEN": "2400",
    "SM_NEURON_SEQUENCE_PARALLEL_ENABLED": "true",
}


def test_sequence_parallel_checks_the_prefix_caching_buckets() -> None:
    """With prefix caching NxD Inference's automatic prefill buckets start at 512, not 128."""
    err = refusal({**BASE, **SP, "SM_VLLM_ENABLE_PREFIX_CACHING": "true"})
    assert "but [512, 1024] are not (buckets [512, 1024, 2400])" in str(err)
    err = refusal({**BASE, **SP})
    assert "but [128, 256, 512, 1024] are not (buckets [128, 256, 512, 1024, 2400])" in str(err)


def test_sequence_parallel_with_chunked_prefill_checks_only_the_chunk() -> None:
    p = plan({**BASE, **SP, **CHUNKED, "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "1536"})
    assert p.argv[p.argv.index("--max-num-batched-tokens") + 1] == "1536"


@pytest.mark.parametrize(
    ("args", "flag", "var"),
    [
        (("--additional-config", "{}"), "--additional-config", "SM_VLLM_ADDITIONAL_CONFIG"),
        (("--additional-config={}",), "--additional-config", "SM_VLLM_ADDITIONAL_CONFIG"),
        (("--override-neuron-config", "{}"), "--override-neuron-config", "SM_NEURON_OVERRIDE_CONFIG"),
        (("--override-neuron-config={}",), "--override-neuron-config", "SM_NEURON_OVERRIDE_CONFIG"),
    ],
)
def test_a_second_neuron_override_after_the_double_dash_is_refused(
    args: tuple[str, ...], flag: str, var: str
) -> None:
    """The plan renders the one Neuron override; vLLM would keep only the last one on the command line."""
    err = refusal(BASE, extra=args)
    assert str(err) == (
        f"{flag} after `--` would replace the plan's Neuron override: set {var} (or SM_NEURON_<KEY>) instead"
    )
    assert err.variables == (flag, var)


def test_flags_that_only_start_like_the_override_flags_pass() -> None:
    assert (
        plan(BASE, extra=("--additional-configs-are-not-this",)).argv[-1]
        == "--additional-configs-are-not-this"
    )
