"""The predicted serialised configuration (plan/lanes/nxdi/compiled.py), rule by rule against the source it
follows (vllm-neuron 0.2.2+lts loader, NxD Inference models/config.py). tests/contract checks the whole of it
against the real code on every configuration; these pin each derivation so a wrong edit fails here first.
"""

from __future__ import annotations

from typing import Any

from neuronserve.plan.lanes.nxdi import compiled

LAUNCH: dict[str, Any] = {
    "tp": 2,
    "seqs": 4,
    "length": 2048,
    "dtype": "bfloat16",
    "chunked": False,
    "max_context": 2048,
    "pa_num_blocks": 4,
    "block_size": 2048,
    "prefix": False,
    "speculation": None,
    "lora": None,
}


def _predict(override: dict[str, Any] | None = None, **launch: Any) -> dict[str, Any]:
    return compiled.predict({**LAUNCH, **launch}, override or {}, nested=False, platform_lnc=1, env_lnc=None)


def test_the_plugins_defaults_and_nxd_inferences_derivations() -> None:
    config = _predict()["neuron_config"]
    assert (config["tp_degree"], config["batch_size"], config["ctx_batch_size"]) == (2, 4, 1)
    assert (config["tkg_batch_size"], config["kv_cache_batch_size"], config["is_continuous_batching"]) == (
        4,
        4,
        True,
    )
    assert (config["seq_len"], config["max_length"], config["n_positions"], config["buckets"]) == (
        2048,
        2048,
        2048,
        [2048],
    )
    assert config["max_new_tokens"] is None  # seq_len - max_context_length = 0 is stored as None
    assert (config["world_size"], config["local_ranks_size"], config["lm_head_pad"]) == (2, 2, False)
    assert config["on_device_sampling_config"] == {**compiled.SAMPLING_DEFAULTS, "dynamic": True}
    assert config["lora_config"] is None and config["is_chunked_prefill"] is False


def test_chunked_prefill_compiles_batch_1_and_the_chunk() -> None:
    """loader :737-739: batch 1, max_context_length the chunk; ChunkedPrefillConfig fills its defaults."""
    config = _predict({"chunked_prefill_config": {"max_num_seqs": 4}}, chunked=True, max_context=512)[
        "neuron_config"
    ]
    assert (config["batch_size"], config["max_context_length"], config["max_new_tokens"]) == (1, 512, 1536)
    assert config["chunked_prefill_config"] == {**compiled.CHUNKED_DEFAULTS, "max_num_seqs": 4}
    assert config["is_chunked_prefill"] and config["is_block_kv_layout"]


def test_an_override_replaces_the_sampling_config_whole_and_null_means_cpu() -> None:
    """A dict given replaces the plugin's default object (NxD Inference's own defaults fill the rest)."""
    given = _predict({"on_device_sampling_config": {"top_k": 4}})["neuron_config"][
        "on_device_sampling_config"
    ]
    assert given == {**compiled.SAMPLING_DEFAULTS, "top_k": 4}  # dynamic back to NxD Inference's False
    assert _predict({"on_device_sampling_config": None})["neuron_config"]["on_device_sampling_config"] is None


def test_eagle_speculation_tiles_the_kv_cache_and_shapes_the_draft() -> None:
    """config.py: fused speculation tiles the KV cache when max_length is a multiple of 128 above it;
    loader :276-290: the EAGLE draft keeps the target's speculation length and is marked."""
    spec = {"method": "eagle", "num_speculative_tokens": 4}
    out = _predict(speculation=spec)
    target, draft = out["neuron_config"], out["draft_neuron_config"]
    assert (target["enable_fused_speculation"], target["speculation_length"], target["kv_cache_tiling"]) == (
        True,
        4,
        True,
    )
    assert (draft["enable_fused_speculation"], draft["speculation_length"], draft["is_eagle_draft"]) == (
        False,
        4,
        True,
    )
    assert (
        _predict(speculation=spec, length=2000, max_context=2000)["neuron_config"]["kv_cache_tiling"] is False
    )
    plain = compiled.draft({**target, "enable_eagle_speculation": False})
    assert plain["speculation_length"] == 0 and "is_eagle_draft" not in plain


def test_the_logical_core_size_env_first_then_the_override_then_the_platform() -> None:
    """config.py _get_lnc: NEURON_LOGICAL_NC_CONFIG > logical_nc_config > the platform's; >1 pads lm_head."""

    def lnc(override: dict[str, Any], platform: int | None, env: int | None) -> Any:
        config = compiled.predict(LAUNCH, override, nested=False, platform_lnc=platform, env_lnc=env)
        return config["neuron_config"].get("logical_nc_config"), config["neuron_config"].get("lm_head_pad")

    assert lnc({}, 2, None) == (2, True)
    assert lnc({"logical_nc_config": 1}, 2, None) == (1, False)
    assert lnc({"logical_nc_config": 1}, 2, 2) == (2, True)
    assert lnc({}, None, None) == (None, None)  # unknown hardware: left out, not guessed


def test_a_multimodal_models_top_level_quantization_reaches_both_models() -> None:
    """loader :888-901 pops the quantization keys into the defaults both configurations copy (:414-425):
    the vision encoder is quantized too."""
    override = {"quantized": True, "text_neuron_config": {"enable_bucketing": False}}
    out = compiled.predict(LAUNCH, override, nested=True, platform_lnc=1, env_lnc=None)
    assert set(out) == {"text_neuron_config", "vision_neuron_config"}
    assert out["text_neuron_config"]["quantized"] and out["vision_neuron_config"]["quantized"]
    assert (
        out["text_neuron_config"]["enable_bucketing"] is False
        and out["vision_neuron_config"]["enable_bucketing"]
    )


def test_lora_numbers_paths_left_out_and_the_staged_counts() -> None:
    lora = {"max_loras": 2, "max_lora_rank": 32, "max_cpu_loras": None}
    override = {
        "target_modules": ["q_proj"],
        "lora_ckpt_json": "/w/lora.json",
        "quantized_checkpoints_path": "/q",
    }
    config = _predict(override, lora=lora)["neuron_config"]
    assert config["lora_config"] == {
        "max_loras": 2,
        "max_lora_rank": 32,
        "max_cpu_loras": 2,  # vLLM's default: max_loras
        "batch_size": 4,
        "dynamic_multi_lora": True,
        "base_model_quantized": False,
    }
    assert not {"target_modules", "lora_ckpt_json", "quantized_checkpoints_path"} & set(config)
    assert config["weights_to_skip_layout_optimization"] == [".*lora.*"]
    staged = compiled.with_lora({"neuron_config": config}, 3, 8)["neuron_config"]["lora_config"]
    assert (staged["max_loras"], staged["max_cpu_loras"]) == (3, 8)
    assert compiled.with_lora({"neuron_config": config}, None, None)["neuron_config"] is config


def test_blocks_as_the_plugin_counts_them() -> None:
    """The contiguous cache: one max_model_len block per sequence (platform.py:275-279, loader :744-746);
    the block layout: the flags' count plus the null block (kv.py's pa_num_blocks)."""
    assert compiled.blocks({"mode": "contiguous"}, 2048, 4) == (4, 2048)
    assert compiled.blocks({"mode": "prefix", "pa_num_blocks": 257, "block_size": 32}, 2048, 4) == (257, 32)
