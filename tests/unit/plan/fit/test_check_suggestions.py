"""The settings an HBM refusal suggests (plan/fit/check.py) in each KV layout (contiguous, prefix caching with
and without SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE, chunked prefill, the custom scheduler's max_model_len blocks,
transformers-neuronx), and the instance facts a plan reports (NEURON_LOGICAL_NC_CONFIG, the HBM override,
visible cores). Three tests were seen failing before the check was fixed: a "²" LNC crashed instance_for,
and no shorter max_model_len was suggested where the block is max_model_len long (transformers-neuronx,
block layout without prefix caching).
"""

from __future__ import annotations

import pytest
from tests.support.builders import OVERHEAD, SIZED_VERSIONS, model_config, sized_plan, sized_refused
from tests.unit.plan.fit.test_check import ENV, IN_TREE_VERSIONS, fixes

from neuronserve.config.settings import parse_settings
from neuronserve.errors import ConfigError
from neuronserve.plan.build import build_plan
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import check as fit
from neuronserve.plan.fit.instances import GIB
from neuronserve.types import LaunchPlan

PREFIX = {"SM_VLLM_ENABLE_PREFIX_CACHING": "true", "SM_VLLM_BLOCK_SIZE": "32"}


# --- suggestions: contiguous ------------------------------------------------------------------------


def test_a_length_below_two_steps_can_still_be_cut_to_one_step() -> None:
    """max_model_len 255 x 512 seqs = 130,560 tokens > 115,031: 128 (one step of 128) x 512 = 65,536 fits,
    so the length suggestion is 128, never None and never above the length given; 115,031 / 255 = 451."""
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 255, 512)
    assert fixes(msg) == "set SM_VLLM_MAX_MODEL_LEN<=128, or SM_VLLM_MAX_NUM_SEQS<=451"


def test_a_block_count_given_to_a_contiguous_cache_changes_no_suggestion() -> None:
    """SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE means nothing to the contiguous cache (warned, ignored): the
    suggestions are the contiguous ones (test_llama_8b_on_inf2_xlarge_refused_with_the_settings_that_fit),
    not a block count."""
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 8192, 32, SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE="4096")
    assert fixes(msg) == "set SM_VLLM_MAX_MODEL_LEN<=3584, or SM_VLLM_MAX_NUM_SEQS<=14"


# --- suggestions: prefix caching (block layout) -----------------------------------------------------


def test_prefix_caching_suggests_length_and_batch_in_blocks() -> None:
    """Blocks of 32 plus the null and the reserved block: room for 115,031 tokens = 3594 blocks.
    Length: ceil(n/32) * 32 seqs + 2 <= 3594 -> 112 blocks = 3584 tokens; seqs: 128 * s + 2 <= 3594 -> 28."""
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 4096, 32, **PREFIX)
    assert fixes(msg) == "set SM_VLLM_MAX_MODEL_LEN<=3584, or SM_VLLM_MAX_NUM_SEQS<=28"


def test_prefix_caching_counts_the_reserved_block_in_the_length_suggestion() -> None:
    """One sequence of 131,072 tokens: ceil(n/32) + 1 null + 1 reserved <= 3594 blocks -> 3592 blocks
    = 114,944 tokens (without the reserved block it would be 114,976)."""
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 131072, 1, **PREFIX)
    assert fixes(msg) == "set SM_VLLM_MAX_MODEL_LEN<=114944"


def test_prefix_caching_steps_the_length_by_the_block_not_by_128() -> None:
    """3 seqs: ceil(n/32) * 3 + 2 <= 3594 -> 1197 blocks = 38,304 tokens, a multiple of the block size 32
    but not of 128 (38,272 would waste a block per sequence); and it fits. One seq of 65,536 is 2048
    blocks + 2 <= 3594: max_num_seqs 1."""
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 65536, 3, **PREFIX)
    assert fixes(msg) == "set SM_VLLM_MAX_MODEL_LEN<=38304, or SM_VLLM_MAX_NUM_SEQS<=1"
    assert sized_plan("Llama-3.1-8B", "inf2.xlarge", 2, 38304, 3, **PREFIX).memory["fits"] is True  # type: ignore[index]


def test_a_given_block_count_is_the_one_suggestion_to_lower() -> None:
    """With SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE the cache size no longer follows length or batch: the fix is
    fewer blocks. Blocks of 16: room for 115,031 tokens = 7189 blocks, less the null and the reserved
    block: 7187 (odd), still above the 2048 blocks that 32 x 1024 tokens need (ceil(1024/16) * 32)."""
    env = {**PREFIX, "SM_VLLM_BLOCK_SIZE": "16", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "8192"}
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 1024, 32, **env)
    assert fixes(msg) == "set SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE<=7187"
    p = sized_plan(
        "Llama-3.1-8B", "inf2.xlarge", 2, 1024, 32, **{**env, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "7187"}
    )
    assert p.memory is not None and p.memory["fits"] is True


def test_a_larger_tp_is_judged_with_the_block_count_given() -> None:
    """Llama-3.3-70B on inf2.48xlarge at TP 8 with prefix caching: TP 24 fits the 512 blocks that 4 x 4096
    tokens need (SM_VLLM_TENSOR_PARALLEL_SIZE=24 is suggested), but not 10,000 blocks given by
    SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE (320,032 tokens x 40,960 bytes = 12.2 GiB on 5.8 GiB of weights):
    then TP 24 is no fix on its own."""
    msg = sized_refused("Llama-3.3-70B-Instruct", "inf2.48xlarge", 8, 4096, 4, **PREFIX)
    assert fixes(msg) == "set SM_VLLM_TENSOR_PARALLEL_SIZE=24 (of 24 NeuronCores)"
    given = sized_refused(
        "Llama-3.3-70B-Instruct",
        "inf2.48xlarge",
        8,
        4096,
        4,
        **PREFIX,
        SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE="10000",
    )
    assert fixes(given) == "no TP, length or batch on this instance fits; pick a larger instance"


# --- instance_for ---------------------------------------------------------------------------------------


def test_neuron_logical_nc_config_1_gives_trn2_twice_the_cores_of_half_the_hbm() -> None:
    """NEURON_LOGICAL_NC_CONFIG=1 on trn2.48xlarge: 128 logical cores of 12 GiB (the default LNC 2 gives
    64 of 24), for the declared type and for the detected devices alike, which then agree."""
    facts = HostFacts(
        python="py",
        versions=dict(SIZED_VERSIONS),
        neuron_devices=16,
        physical_cores=128,
        paths={"/m": ModelFacts("dir", model_config("Qwen3-8B"), "d" * 64)},
    )
    env = {**ENV, "NEURONSERVE_INSTANCE_TYPE": "trn2.48xlarge", "SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}
    for declared in (env, {k: v for k, v in env.items() if k != "NEURONSERVE_INSTANCE_TYPE"}):
        p = build_plan(parse_settings({**declared, "NEURON_LOGICAL_NC_CONFIG": "1"}), facts)
        assert p.instance is not None and p.memory is not None
        assert (p.instance["neuron_cores"], p.instance["logical_nc_config"]) == (128, 1)
        assert p.memory["hbm_bytes_per_core"] == 12 * GIB


def test_a_declared_instance_is_sourced_to_neuronserve_instance_type() -> None:
    """The instance facts say where they came from, and an unknown type is refused naming the variable."""
    p = sized_plan("Llama-3.1-8B", "ml.inf2.xlarge", 2, 4096, 4)
    assert p.instance is not None and p.instance["source"] == "NEURONSERVE_INSTANCE_TYPE"
    with pytest.raises(ConfigError) as err:
        sized_plan("Llama-3.1-8B", "inf9.xlarge", 2, 4096, 4)
    assert str(err.value).startswith("NEURONSERVE_INSTANCE_TYPE='inf9.xlarge' is not a Neuron instance type")
    assert err.value.variables == ("NEURONSERVE_INSTANCE_TYPE",)


def test_an_hbm_override_is_named_in_the_source() -> None:
    """NEURONSERVE_HBM_GIB_PER_CORE replaces the table's figure and is named after the instance's source."""
    p = sized_plan("Llama-3.1-8B", "inf2.xlarge", 2, 4096, 4, NEURONSERVE_HBM_GIB_PER_CORE="20")
    assert p.instance is not None and p.memory is not None
    assert p.instance["source"] == "NEURONSERVE_INSTANCE_TYPE + NEURONSERVE_HBM_GIB_PER_CORE"
    assert p.memory["hbm_bytes_per_core"] == 20 * GIB


def test_visible_cores_may_equal_the_declared_instance_but_not_exceed_it() -> None:
    """NEURON_RT_VISIBLE_CORES giving both cores of inf2.xlarge is fine; three cannot be on it: refused
    with the exact words, naming NEURONSERVE_INSTANCE_TYPE and the variable the count came from."""
    model = {"/m": ModelFacts("dir", model_config("Llama-3.1-8B"), "d" * 64)}

    def with_visible(cores: int) -> LaunchPlan:
        facts = HostFacts(
            python="py",
            versions=dict(SIZED_VERSIONS),
            visible_cores=cores,
            cores_source="NEURON_RT_VISIBLE_CORES",
            paths=model,
        )
        return build_plan(parse_settings(ENV), facts)

    p = with_visible(2)
    assert p.memory is not None and p.memory["overhead_bytes_per_core"] == OVERHEAD
    with pytest.raises(ConfigError) as err:
        with_visible(3)
    assert str(err.value) == (
        "NEURON_RT_VISIBLE_CORES gives 3 NeuronCores but NEURONSERVE_INSTANCE_TYPE=inf2.xlarge has 2: "
        "fix or unset NEURONSERVE_INSTANCE_TYPE"
    )
    assert err.value.variables == ("NEURONSERVE_INSTANCE_TYPE", "NEURON_RT_VISIBLE_CORES")


def test_instance_for_does_not_crash_on_a_superscript_lnc() -> None:
    """NEURON_LOGICAL_NC_CONFIG="²": "²".isdigit() is True but int("²") raises ValueError, and instance_for
    read the LNC that way: it crashed. A value that is no whole number is not an LNC (the Neuron plan
    refuses it by name); the instance keeps its default LNC 2."""
    settings = parse_settings({"NEURONSERVE_INSTANCE_TYPE": "trn2.48xlarge", "NEURON_LOGICAL_NC_CONFIG": "²"})
    instance = fit.instance_for(settings, HostFacts())
    assert instance is not None and (instance.cores, instance.logical_nc_config) == (64, 2)


# --- suggestions: layouts whose block size is max_model_len -----------------------------------------

TNX = {"VLLM_NEURON_FRAMEWORK": "transformers-neuronx", "NEURONSERVE_INTEGRATION": "in-tree"}


def test_transformers_neuronx_is_estimated_from_seqs_times_length() -> None:
    """transformers-neuronx's plan records no kv_tokens (its block is max_model_len): the KV cache is
    max_num_seqs x max_model_len, the same 1,073,741,824 bytes as the plugin's contiguous cache."""
    p = sized_plan("Llama-3.1-8B", "inf2.xlarge", 2, 4096, 4, versions=IN_TREE_VERSIONS, **TNX)
    assert p.memory is not None and p.memory["kv_bytes_per_core"] == 1_073_741_824


def test_transformers_neuronx_refusal_suggests_a_shorter_length() -> None:
    """Its contiguous cache is one block of max_model_len per sequence, so a shorter max_model_len fits
    exactly as with the plugin (3584, test_llama_8b_on_inf2_xlarge_refused_with_the_settings_that_fit).
    Before, the block size recorded (= the old max_model_len) was taken as the step of the length search,
    so the only length tried was the one refused and the refusal never suggested one."""
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 8192, 32, versions=IN_TREE_VERSIONS, **TNX)
    assert fixes(msg) == "set SM_VLLM_MAX_MODEL_LEN<=3584, or SM_VLLM_MAX_NUM_SEQS<=14"
    shorter = sized_plan("Llama-3.1-8B", "inf2.xlarge", 2, 3584, 32, versions=IN_TREE_VERSIONS, **TNX)
    assert shorter.memory is not None and shorter.memory["fits"] is True


def test_chunked_prefill_keeps_its_block_size_in_the_length_suggestion() -> None:
    """Chunked prefill runs vLLM's native scheduler, which keeps --block-size 32 (kv.py): unlike the custom
    scheduler's max_model_len blocks, a shorter length means fewer blocks of 32, not shorter blocks.
    ceil(n/32) * 3 + 1 null block <= 3594 -> 1197 blocks = 38,304 tokens (blocks of n tokens would give
    (3 + 1) x n <= 115,031 -> 28,672), and it fits."""
    env = {
        "SM_VLLM_ENABLE_CHUNKED_PREFILL": "true",
        "SM_NEURON_CHUNKED_PREFILL_CONFIG": '{"max_num_seqs": 3}',
        "SM_VLLM_BLOCK_SIZE": "32",
    }
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 65536, 3, **env)
    assert fixes(msg) == "set SM_VLLM_MAX_MODEL_LEN<=38304, or SM_VLLM_MAX_NUM_SEQS<=1"
    assert sized_plan("Llama-3.1-8B", "inf2.xlarge", 2, 38304, 3, **env).memory["fits"] is True  # type: ignore[index]


def test_a_block_count_below_the_layouts_need_comes_with_the_batch_it_holds() -> None:
    """4096 given blocks of 32 for 32 x 4096 tokens (the 4096 blocks rules.check_block_layout needs):
    3592 fit, and "<=3592" alone was suggested although the next plan refuses 3592 blocks for that
    batch. Now the suggestion carries the batch 3592 blocks hold (3592 // 128 = 28), and it plans."""
    env = {**PREFIX, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "4096"}
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 4096, 32, **env)
    assert fixes(msg) == "set SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE<=3592 with SM_VLLM_MAX_NUM_SEQS<=28"
    with pytest.raises(ConfigError, match="cannot hold 32 sequences"):
        sized_plan(
            "Llama-3.1-8B", "inf2.xlarge", 2, 4096, 32, **{**env, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "3592"}
        )
    p = sized_plan(
        "Llama-3.1-8B", "inf2.xlarge", 2, 4096, 28, **{**env, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "3592"}
    )
    assert p.memory["fits"] is True  # type: ignore[index]


def test_a_block_count_that_holds_exactly_the_batch_is_suggested_alone() -> None:
    """8 seqs of 14,368 tokens in blocks of 32 need 449 x 8 = 3592 blocks (rules.check_block_layout), and
    3592 is also the most that fit: the need is met exactly, so the block count alone is the fix (no
    "with SM_VLLM_MAX_NUM_SEQS<=8", which is the batch already set), and that plan fits."""
    env = {**PREFIX, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "4096"}
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 14368, 8, **env)
    assert fixes(msg) == "set SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE<=3592"
    p = sized_plan(
        "Llama-3.1-8B", "inf2.xlarge", 2, 14368, 8, **{**env, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "3592"}
    )
    assert p.memory["fits"] is True  # type: ignore[index]


def test_a_block_count_below_one_sequence_comes_with_a_length_that_fits() -> None:
    """One sequence of 131,072 tokens needs 4096 blocks of 32; at most 3592 fit, which hold no whole
    sequence (3592 // 4096 = 0): "<=3592 with SM_VLLM_MAX_NUM_SEQS<=0" would name a batch vLLM refuses,
    and "nothing on this instance fits" would be wrong too: 3592 blocks hold one sequence of
    3592 * 32 = 114,944 tokens, and that plan fits."""
    env = {**PREFIX, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "4096"}
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 131072, 1, **env)
    assert fixes(msg) == "set SM_VLLM_MAX_MODEL_LEN<=114944 with SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE<=3592"
    p = sized_plan(
        "Llama-3.1-8B", "inf2.xlarge", 2, 114944, 1, **{**env, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "3592"}
    )
    assert p.memory["fits"] is True  # type: ignore[index]


def test_a_block_count_below_the_batch_suggests_no_zero_length() -> None:
    """1024 sequences of 131,072 tokens in blocks of 128: about 900 blocks fit, fewer than one per
    sequence, so no whole block per sequence is left: "SM_VLLM_MAX_MODEL_LEN<=0" must not be offered."""
    env = {**PREFIX, "SM_VLLM_BLOCK_SIZE": "128", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "1048576"}
    msg = sized_refused("Llama-3.1-8B", "inf2.xlarge", 2, 131072, 1024, **env)
    assert fixes(msg) == "no TP, length or batch on this instance fits; pick a larger instance"
