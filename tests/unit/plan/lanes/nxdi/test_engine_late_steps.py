"""The later steps of the NxD Inference engine (plan/lanes/nxdi/engine.py, steps.py), word for word: chunked
prefill's chunk, max_context_length, transformers-neuronx, the logical core size, sequence parallelism,
the compiled-graph record the cache key hashes, and a second override after `--`. (Added where mutation
testing showed the names and values they pass to the rules unchecked: docs/TESTING.md.)
"""

from __future__ import annotations

import pytest
from tests.support.builders import facts, plan, refusal
from tests.unit.plan.lanes.nxdi.test_engine import BASE

from neuronserve.config.settings import parse_settings
from neuronserve.plan import command
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import ModelFacts
from neuronserve.plan.lanes.nxdi.engine import neuron_engine
from neuronserve.plan.resolution import Resolution

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
        "SM_NEURON_QUANTIZED_CHECKPOINTS_PATH": "/q",
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
    graph = dict(engine.graph)
    # the configuration NxD Inference will serialise, which the key hashes (plan/lanes/nxdi/compiled.py;
    # tests/unit/plan/lanes/nxdi/test_compiled.py and tests/contract check it field by field)
    predicted = graph.pop("compiled")
    target, draft_config = predicted["neuron_config"], predicted["draft_neuron_config"]
    assert (target["speculation_length"], target["enable_eagle_speculation"], target["quantized"]) == (
        3,
        True,
        True,
    )
    assert (target["logical_nc_config"], target["lm_head_pad"], draft_config["is_eagle_draft"]) == (
        2,
        True,
        True,
    )
    assert graph == {
        "integration": "plugin",
        "framework": None,
        "tp": 2,
        "max_model_len": 2048,
        "max_num_seqs": 4,
        "dtype": "bfloat16",
        "kv": {"kv_tokens": 8192, "mode": "contiguous"},
        "chunked_prefill": False,
        "max_num_batched_tokens": None,
        "override": {"logical_nc_config": 2, "quantized": True, "quantized_checkpoints_path": "/q"},
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
    """Not read as a second override; vLLM 0.11.0 has no such option either (plan/flagcheck.py)."""
    assert command.refuse_extra_override(("--additional-configs-are-not-this",)) is None
    err = refusal(BASE, extra=("--additional-configs-are-not-this",))
    assert "vLLM 0.11.0 has no --additional-configs-are-not-this" in str(err)
