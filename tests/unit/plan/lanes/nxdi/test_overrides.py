"""Rules on override_neuron_config (plan/lanes/nxdi/overrides.py) called directly, each refusal and
warning word for word (added where mutation testing showed them unchecked: docs/TESTING.md)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import raised, resolution

from neuronserve.plan.lanes.nxdi.overrides import (
    check_chunked_config,
    check_launch_duplicates,
    check_lora,
    check_lora_modules,
    check_sampling,
    json_text,
)

OV = "SM_NEURON_OVERRIDE_CONFIG"


@pytest.mark.parametrize(
    ("given", "expected"),
    [("torch.bfloat16", "bf16"), ("half", "float16"), ("fp16", "torch.float16"), ("float", "float32")],
)
def test_dtype_spellings_that_agree_pass(given: str, expected: str) -> None:
    check_launch_duplicates(
        {"torch_dtype": (expected, "SM_VLLM_DTYPE=x")}, resolution(override={"torch_dtype": given})
    )


def test_a_disagreeing_launch_key_names_both_settings() -> None:
    launch = {
        "tp_degree": (2, "SM_VLLM_TENSOR_PARALLEL_SIZE=2"),
        "seq_len": (4096, "SM_VLLM_MAX_MODEL_LEN=4096"),
    }
    check_launch_duplicates(launch, resolution(override={"seq_len": 4096}))  # agreeing: nothing to say
    err = raised(check_launch_duplicates, launch, resolution({"tp_degree": OV}, override={"tp_degree": 8}))
    assert str(err) == (
        f"{OV} sets tp_degree=8 but the launch gives tp_degree=2 (SM_VLLM_TENSOR_PARALLEL_SIZE=2); "
        "the plugin "
        "merges the override over its own value (vllm-neuron 0.2.2+lts "
        "worker/neuronx_distributed_model_loader.py:880), so the compiled graph and "
        f"vLLM would disagree: remove {OV}, or change SM_VLLM_TENSOR_PARALLEL_SIZE instead"
    )
    assert err.variables == (OV, "SM_VLLM_TENSOR_PARALLEL_SIZE")
    err = raised(
        check_launch_duplicates,
        {"torch_dtype": ("bf16", "SM_VLLM_DTYPE=bf16")},
        resolution(override={"torch_dtype": "float16"}),
    )
    assert err.variables == ("SM_NEURON_TORCH_DTYPE", "SM_VLLM_DTYPE")


@pytest.mark.parametrize(
    ("value", "text"), [(True, "true"), (False, "false"), (None, "null"), (0, "0"), ("x", "x")]
)
def test_json_text(value: Any, text: str) -> None:
    assert json_text(value) == text


@pytest.mark.parametrize("raw", ["1", "-1", " 2 "])
def test_on_device_sampling_disabled_is_refused_unless_zero(raw: str) -> None:
    """A non-zero value makes the model build `Sampler()`, but `Sampler` is vLLM's sampler module
    (vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:47, 0.4.1 :54), so the call at :70
    (0.4.1 :81) raises TypeError: 'module' object is not callable. The message said "broken"."""
    err = raised(check_sampling, resolution(env={"NEURON_ON_DEVICE_SAMPLING_DISABLED": raw}, override={}))
    assert str(err) == (
        f"NEURON_ON_DEVICE_SAMPLING_DISABLED={raw} fails the engine at load: vllm-neuron imports vLLM's "
        "sampler module as Sampler and calls it (TypeError: 'module' object is not callable): unset it (or "
        "set 0) and set SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null for CPU sampling (needed for logprobs)"
    )
    assert err.variables == ("NEURON_ON_DEVICE_SAMPLING_DISABLED",)


def test_on_device_sampling_disabled_that_is_no_integer_is_refused_as_such() -> None:
    """The plugin reads it as bool(int(value)) (loader :67-68): "yes" raises ValueError at load."""
    err = raised(check_sampling, resolution(env={"NEURON_ON_DEVICE_SAMPLING_DISABLED": "yes"}, override={}))
    assert str(err) == (
        "NEURON_ON_DEVICE_SAMPLING_DISABLED=yes is no integer (vllm-neuron reads it with int() and fails at "
        "load): unset it (or set 0) and set SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null for CPU sampling"
    )


@pytest.mark.parametrize("raw", ["0", " ", "-0"])
def test_on_device_sampling_disabled_zero_passes(raw: str) -> None:
    warnings: list[str] = []
    check_sampling(
        resolution(env={"NEURON_ON_DEVICE_SAMPLING_DISABLED": raw}, warnings=warnings, override={})
    )
    assert warnings == []


def test_a_sampling_config_must_be_an_object_with_known_keys() -> None:
    err = raised(check_sampling, resolution(override={"on_device_sampling_config": [1]}))
    assert (str(err), err.variables) == (
        "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG must be a JSON object or null",
        ("SM_NEURON_ON_DEVICE_SAMPLING_CONFIG",),
    )
    err = raised(
        check_sampling,
        resolution(
            {"on_device_sampling_config": OV},
            override={"on_device_sampling_config": {"topk": 5, "dynamic": True}},
        ),
    )
    assert str(err).startswith(f"{OV}: unknown key(s) topk (NxD Inference drops them silently): use only ")
    assert "deterministic, do_sample, dynamic, global_topk" in str(err)
    assert err.variables == (OV,)


@pytest.mark.parametrize("topk", [0, -1, True, "8"])
def test_global_topk_outside_the_device_range_is_refused(topk: Any) -> None:
    cfg = {"on_device_sampling_config": {"global_topk": topk, "dynamic": True, "deterministic": False}}
    err = raised(check_sampling, resolution(override=cfg))
    assert str(err) == (
        f"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG: global_topk={topk} must be a positive integer (the plugin "
        "samples at most 256 on device): set global_topk <= 256"
    )


@pytest.mark.parametrize("topk", [257, 1024])
def test_global_topk_above_256_is_capped_by_the_plugin_and_said(topk: int) -> None:
    """The runner logs a warning and samples at most 256 (vllm-neuron 0.2.2+lts
    worker/neuronx_distributed_model_runner.py:259-267 warns, :1251 caps requests' top_k): no failure,
    so planned with a warning that the larger graph buys nothing. It used to be refused."""
    warnings: list[str] = []
    cfg = {"on_device_sampling_config": {"global_topk": topk, "dynamic": True, "deterministic": False}}
    check_sampling(resolution(warnings=warnings, override=cfg))
    assert warnings == [
        f"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG: global_topk={topk} is above 256: the plugin samples at most "
        f"256 on device (it caps requests' top_k there), so a top-k of {topk} is compiled for nothing: set "
        "global_topk <= 256",
        "on-device sampling: requests' top_k above 256 are clamped to 256 by the plugin",
    ]


@pytest.mark.parametrize("topk", [1, 256])
def test_global_topk_at_the_bounds_passes_and_its_clamp_is_said(topk: int) -> None:
    warnings: list[str] = []
    override = {"on_device_sampling_config": {"global_topk": topk, "dynamic": True, "deterministic": False}}
    check_sampling(resolution(warnings=warnings, override=override))
    assert warnings == [
        f"on-device sampling: requests' top_k above {topk} are clamped to {topk} by the plugin"
    ]


def test_a_partial_sampling_config_gets_the_plugin_defaults_back() -> None:
    warnings: list[str] = []
    override: dict[str, Any] = {"on_device_sampling_config": {"global_topk": 64}}
    check_sampling(resolution(warnings=warnings, override=override))
    assert override["on_device_sampling_config"] == {
        "global_topk": 64,
        "dynamic": True,
        "deterministic": False,
    }
    assert warnings == [
        "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG: added the plugin's defaults {'dynamic': True, 'deterministic': "
        "False} (a partial config replaces them, and NxD Inference's own default dynamic=false samples every "
        "request greedily)",
        "on-device sampling: requests' top_k above 64 are clamped to 64 by the plugin",
    ]


def test_dynamic_false_is_said_to_ignore_request_parameters() -> None:
    warnings: list[str] = []
    check_sampling(
        resolution(
            warnings=warnings,
            override={"on_device_sampling_config": {"dynamic": False, "deterministic": True}},
        )
    )
    assert warnings == [
        "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG: dynamic=false ignores each request's temperature/top_k/top_p",
        "on-device sampling: requests' top_k above 256 are clamped to 256 by the plugin",
    ]


def test_chunked_prefill_config_keys() -> None:
    warnings: list[str] = []
    override: dict[str, Any] = {"chunked_prefill_config": {"kernel_q_tile_size": 128}}
    check_chunked_config(8, resolution(warnings=warnings, override=override))
    assert override["chunked_prefill_config"] == {"kernel_q_tile_size": 128, "max_num_seqs": 8}
    assert warnings == [
        "SM_NEURON_CHUNKED_PREFILL_CONFIG: max_num_seqs set to max_num_seqs 8 (NxD Inference's default is 0)"
    ]
    err = raised(
        check_chunked_config,
        8,
        resolution({"chunked_prefill_config": OV}, override={"chunked_prefill_config": {"max_num_seq": 8}}),
    )
    assert str(err) == (
        f"{OV}: unknown key(s) max_num_seq (NxD Inference ignores them and uses its defaults, "
        "max_num_seqs=0): "
        "use only kernel_kv_tile_size, kernel_q_tile_size, max_num_seqs, tkg_model_enabled, e.g. "
        '{"max_num_seqs": 8}'
    )
    assert err.variables == (OV,)
    for bad in (0, True, "4"):
        err = raised(
            check_chunked_config, 8, resolution(override={"chunked_prefill_config": {"max_num_seqs": bad}})
        )
        assert str(err) == "SM_NEURON_CHUNKED_PREFILL_CONFIG: max_num_seqs must be a positive integer, e.g. 8"
    warnings = []
    check_chunked_config(
        8, resolution(warnings=warnings, override={"chunked_prefill_config": {"max_num_seqs": 1}})
    )
    check_chunked_config(8, resolution(warnings=warnings, override={"chunked_prefill_config": None}))
    assert warnings == []


LORA = {"enable-lora": "SM_VLLM_ENABLE_LORA"}


def test_lora_keys_without_lora_are_refused() -> None:
    err = raised(
        check_lora,
        False,
        "0.2.2+lts",
        resolution(LORA, override={"target_modules": ["q_proj"], "lora_ckpt_json": "/a.json"}),
    )
    assert str(err) == (
        "SM_NEURON_LORA_CKPT_JSON sets lora_ckpt_json but LoRA is off: "
        "set SM_VLLM_ENABLE_LORA=true, or remove it"
    )
    assert err.variables == ("SM_NEURON_LORA_CKPT_JSON", "SM_VLLM_ENABLE_LORA")
    check_lora(False, "0.2.0", resolution(LORA, override={}))  # no LoRA, no keys: nothing to say


@pytest.mark.parametrize("version", ["0.2.0", "0.2.1+lts", "0.1.9"])
def test_lora_before_0_2_2_is_refused(version: str) -> None:
    err = raised(check_lora, True, version, resolution(LORA, override={"lora_ckpt_json": "/a.json"}))
    assert str(err) == (
        f"SM_VLLM_ENABLE_LORA: LoRA raises NotImplementedError in vllm-neuron {version} (0.2.2+lts adds it): "
        "unset SM_VLLM_ENABLE_LORA, or use the image's vllm-neuron 0.2.2+lts"
    )
    assert err.variables == ("SM_VLLM_ENABLE_LORA",)


@pytest.mark.parametrize("version", ["0.2.2+lts", "0.2.10", "0.3", "1.0.0", None, "0.2.2rc1"])
def test_lora_from_0_2_2_needs_its_adapters_named(version: str | None) -> None:
    check_lora(True, version, resolution(LORA, override={"lora_ckpt_json": "/a.json"}))
    err = raised(check_lora, True, version, resolution(LORA, override={}))
    assert str(err) == (
        "SM_VLLM_ENABLE_LORA=true on vllm-neuron 0.2.2 needs its adapters named: set "
        'SM_VLLM_LORA_MODULES="name=s3://bucket/adapter/ other=/local/dir" (staged, and the plan writes the '
        "plugin's lora_ckpt_json from them)"
    )
    assert err.variables == ("SM_VLLM_ENABLE_LORA", "SM_VLLM_LORA_MODULES")


def test_a_users_adapter_list_with_lora_modules_is_a_conflict() -> None:
    check_lora_modules("SM_VLLM_LORA_MODULES", resolution(LORA, override={}))
    err = raised(
        check_lora_modules, "SM_VLLM_LORA_MODULES", resolution(LORA, override={"lora_ckpt_json": "/a"})
    )
    assert str(err) == (
        "SM_VLLM_LORA_MODULES and SM_NEURON_LORA_CKPT_JSON both name the LoRA adapters: keep "
        "SM_VLLM_LORA_MODULES (the plan stages them and writes lora_ckpt_json itself) and remove "
        "SM_NEURON_LORA_CKPT_JSON"
    )
    assert err.variables == ("SM_VLLM_LORA_MODULES", "SM_NEURON_LORA_CKPT_JSON")


def test_a_launch_key_of_another_type_is_not_the_same_value() -> None:
    err = raised(
        check_launch_duplicates,
        {"tp_degree": (2, "SM_VLLM_TENSOR_PARALLEL_SIZE=2")},
        resolution(override={"tp_degree": "2"}),
    )
    assert err.variables == ("SM_NEURON_TP_DEGREE", "SM_VLLM_TENSOR_PARALLEL_SIZE")


def test_a_non_integer_sampling_switch_is_refused() -> None:
    err = raised(check_sampling, resolution(env={"NEURON_ON_DEVICE_SAMPLING_DISABLED": "X0"}, override={}))
    assert err.variables == ("NEURON_ON_DEVICE_SAMPLING_DISABLED",)


def test_every_unknown_key_is_named() -> None:
    err = raised(check_sampling, resolution(override={"on_device_sampling_config": {"b_key": 1, "a_key": 2}}))
    assert str(err).startswith(
        "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG: unknown key(s) a_key, b_key (NxD Inference"
    )
    err = raised(check_chunked_config, 8, resolution(override={"chunked_prefill_config": {"y": 1, "x": 2}}))
    assert str(err).startswith("SM_NEURON_CHUNKED_PREFILL_CONFIG: unknown key(s) x, y (NxD Inference")


def test_refusals_name_the_sampling_and_chunked_variables() -> None:
    cfg = {"on_device_sampling_config": {"global_topk": 0}}
    assert raised(check_sampling, resolution(override=cfg)).variables == (
        "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG",
    )
    bad = {"chunked_prefill_config": {"max_num_seqs": 0}}
    assert raised(check_chunked_config, 8, resolution(override=bad)).variables == (
        "SM_NEURON_CHUNKED_PREFILL_CONFIG",
    )


def test_a_local_build_suffix_is_not_part_of_the_version() -> None:
    raised(
        check_lora, True, "0.2.1+9", resolution(LORA, override={"lora_ckpt_json": "/a.json"})
    )  # 0.2.1, not 0.2.19
