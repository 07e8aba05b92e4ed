"""The KV layout's edge cases mutation testing found unchecked (plan/lanes/nxdi/kv.py, docs/TESTING.md): which
variable a KV refusal or warning names when the override key came from a JSON object, counts that are no
whole number, a count set to false, and pa_block_size checked against the block size the plan really uses.
Each goes through build_plan (the plan a user gets) unless the case is about kv_layout's own table.
"""

from __future__ import annotations

import pytest
from tests.support.builders import additional, flag, llama_plan, llama_refusal
from tests.unit.plan.lanes.nxdi.test_kv import layout

from neuronserve.errors import ConfigError

PREFIX = {"SM_VLLM_ENABLE_PREFIX_CACHING": "true"}


@pytest.mark.parametrize("name", ["SM_NEURON_OVERRIDE_CONFIG", "SM_VLLM_OVERRIDE_NEURON_CONFIG"])
def test_is_prefix_caching_from_an_override_object_names_that_object(name: str) -> None:
    """The refusal names the variable the user actually set (the JSON object), not the SM_NEURON_<KEY>
    spelling of the key, which the user never wrote."""
    err = llama_refusal({name: '{"is_prefix_caching": true}'})
    assert str(err) == (
        f"{name} sets is_prefix_caching but prefix caching is off: set SM_VLLM_ENABLE_PREFIX_CACHING=true, "
        "or remove is_prefix_caching"
    )
    assert err.variables == (name,)


@pytest.mark.parametrize("key", ["is_prefix_caching", "is_block_kv_layout"])
def test_a_prefix_key_set_false_in_an_override_object_names_that_object(key: str) -> None:
    """Prefix caching with is_prefix_caching / is_block_kv_layout false in SM_NEURON_OVERRIDE_CONFIG: the
    refusal tells the user to fix SM_NEURON_OVERRIDE_CONFIG, where the false is."""
    err = llama_refusal({**PREFIX, "SM_NEURON_OVERRIDE_CONFIG": f'{{"{key}": false}}'})
    assert str(err) == (
        f"SM_NEURON_OVERRIDE_CONFIG sets {key}=false but prefix caching needs it true: remove it"
    )
    assert err.variables == ("SM_NEURON_OVERRIDE_CONFIG",)


def test_an_ignored_block_count_key_names_the_object_it_came_from() -> None:
    """pa_num_blocks / pa_block_size in an override object with the contiguous cache: the warning says
    which variable to clean up (the object), not SM_NEURON_PA_NUM_BLOCKS."""
    p = llama_plan({"SM_VLLM_OVERRIDE_NEURON_CONFIG": '{"pa_num_blocks": 5, "pa_block_size": 16}'})
    block_only = (
        " is only read with the block KV layout (prefix caching, chunked prefill or is_block_kv_layout)"
    )
    for key in ("pa_num_blocks", "pa_block_size"):
        assert f"SM_VLLM_OVERRIDE_NEURON_CONFIG ignored: {key}{block_only}" in p.warnings
    assert not any(w.startswith("SM_NEURON_PA_") for w in p.warnings)


@pytest.mark.parametrize(
    ("env", "extra", "var", "shown"),
    [
        ({**PREFIX, "SM_VLLM_BLOCK_SIZE": "abc"}, (), "SM_VLLM_BLOCK_SIZE", "'abc'"),
        (
            {**PREFIX, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "12.5"},
            (),
            "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE",
            "'12.5'",
        ),
        (PREFIX, ("--block-size", "-16"), "-- --block-size", "'-16'"),
        (
            {"SM_VLLM_BLOCK_SIZE": "x", "SM_NEURON_IS_BLOCK_KV_LAYOUT": "true"},
            (),
            "SM_VLLM_BLOCK_SIZE",
            "'x'",
        ),
        # An empty SM_VLLM_* value is a bare flag (true), which is no count.
        ({**PREFIX, "SM_VLLM_BLOCK_SIZE": ""}, (), "SM_VLLM_BLOCK_SIZE", "True"),
        # 0 and "²" used to escape as ZeroDivisionError / ValueError tracebacks (str.isdigit() is true
        # for "²", which int() refuses): they are refused like any other non-count.
        ({**PREFIX, "SM_VLLM_BLOCK_SIZE": "0"}, (), "SM_VLLM_BLOCK_SIZE", "'0'"),
        ({**PREFIX, "SM_VLLM_BLOCK_SIZE": "\u00b2"}, (), "SM_VLLM_BLOCK_SIZE", "'\u00b2'"),
        (
            {**PREFIX, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "\u00b2"},
            (),
            "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE",
            "'\u00b2'",
        ),
    ],
)
def test_a_block_count_that_is_no_positive_integer_is_refused_by_name(
    env: dict[str, str], extra: tuple[str, ...], var: str, shown: str
) -> None:
    """A --block-size / --num-gpu-blocks-override that is no count is refused before anything is
    compiled, naming the variable (also a `--` argument) and the value as given; never a traceback."""
    err = llama_refusal(env, extra=extra)
    assert (str(err), err.variables) == (f"{var}={shown} must be a positive integer", (var,))


def test_block_size_one_is_a_block_size() -> None:
    """The lower boundary of the positive-integer check: vLLM's smallest --block-size, 1, is planned
    (ceil(2048/1)*4 = 8192 blocks), not refused."""
    p = llama_plan({**PREFIX, "SM_VLLM_BLOCK_SIZE": "1"})
    assert (flag(p, "--block-size"), flag(p, "--num-gpu-blocks-override")) == ("1", "8192")


def test_zero_blocks_get_the_count_they_need() -> None:
    """--num-gpu-blocks-override 0 is a whole number (only a block size must be positive): the refusal is
    the one that says how many blocks max_model_len x max_num_seqs needs."""
    err = llama_refusal({**PREFIX, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "0"})
    assert str(err) == (
        "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=0 KV blocks cannot hold 4 sequences of 2048 tokens in blocks of 32: "
        "set SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=256 or more (ceil(max_model_len / block_size) * max_num_seqs)"
    )
    assert err.variables == ("SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE",)


def test_a_block_size_set_false_is_no_block_size() -> None:
    """SM_VLLM_BLOCK_SIZE=false means "not set" (as for every SM_VLLM_* flag): the default block size is
    used and said, instead of refusing `False` as a non-integer."""
    p = llama_plan({**PREFIX, "SM_VLLM_BLOCK_SIZE": "false"})
    assert (flag(p, "--block-size"), flag(p, "--num-gpu-blocks-override")) == ("32", "256")
    assert "block_size defaulted to 32 for the block KV layout" in p.warnings


def test_pa_num_blocks_equal_to_the_computed_count_is_not_also_said_to_be_computed() -> None:
    """SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=false is unset (plan/lanes/nxdi/kv.py and plan/resolution.py's
    origins agree), so pa_num_blocks without a block count is refused as when the variable is absent;
    with the count given and equal, the plan does not add "num_gpu_blocks_override computed as ..." (the
    user stated it)."""
    env = {**PREFIX, "SM_NEURON_PA_NUM_BLOCKS": "256"}
    err = llama_refusal({**env, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "false"})
    assert str(err) == str(llama_refusal(env))
    assert err.variables == ("SM_NEURON_PA_NUM_BLOCKS", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE")
    p = llama_plan({**env, "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "256"})
    assert flag(p, "--num-gpu-blocks-override") == "256"
    assert additional(p)["override_neuron_config"] == {
        "pa_num_blocks": 256,
        "is_block_kv_layout": True,
        "is_prefix_caching": True,
    }
    assert [w for w in p.warnings if "block" in w] == ["block_size defaulted to 32 for the block KV layout"]


@pytest.mark.parametrize(
    ("env", "override", "block"),
    [
        ({**PREFIX, "SM_VLLM_BLOCK_SIZE": "32"}, {"pa_block_size": 16}, 32),
        # The block size defaulted for prefix caching.
        (PREFIX, {"pa_block_size": 64}, 32),
    ],
)
def test_pa_block_size_must_equal_the_block_size_the_plan_uses(
    env: dict[str, str], override: dict[str, object], block: int
) -> None:
    """pa_block_size replaces the block size the plugin passes (loader.py:777-778), so one that differs
    from the block size kv_layout settled on (given or defaulted) is refused by name."""
    with pytest.raises(ConfigError) as err:
        layout(env, override)
    size = override["pa_block_size"]
    assert str(err.value) == (
        f"SM_NEURON_PA_BLOCK_SIZE sets pa_block_size={size} but the block size is {block}: set "
        f"SM_VLLM_BLOCK_SIZE={size} or remove pa_block_size"
    )
    assert err.value.variables == ("SM_NEURON_PA_BLOCK_SIZE", "SM_VLLM_BLOCK_SIZE")
    _, kv, _, _ = layout(env, {**override, "pa_block_size": block})
    assert kv["block_size"] == block
