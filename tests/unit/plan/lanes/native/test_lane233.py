"""Lane 2.33 (vllm-neuron 0.29.0.1.2.0 on vLLM 0.29.0, plan/lanes/native/rules.py V0_29) through the whole
plan on a laptop: its stack on trn2.48xlarge and trn2.3xlarge, argv its own vLLM accepts, the native
route and the precompile cache rendered, the keyed cache over the whole VLLM_CACHE_ROOT, a key no other
lane shares, inf2/trn1 refused pointing to 2.28, and 2.33's additional_config namespaces."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.support.builders import facts, plan, refusal
from tests.support.vllm_cli import check_argv

import neuronserve.plan.lanes.registry as lanes
from neuronserve.plan.lanes.native import cache, rules

LAPTOP = {"vllm": None, "vllm-neuron": None}
BASE = {
    "SM_VLLM_MODEL": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    "SM_VLLM_MAX_MODEL_LEN": "1024",
    "SM_VLLM_MAX_NUM_SEQS": "4",
    "NEURONSERVE_DEVICE": "neuron",
}
STACK = {"lane": "2.33", "sdk": "2.33.0", "vllm_neuron": "0.29.0.1.2.0", "vllm": "0.29.0"}


def build(lane: str = "2.33", instance: str = "trn2.48xlarge", **env: str) -> Any:
    settings = {**BASE, "NEURONSERVE_STACK": lane, "NEURONSERVE_INSTANCE_TYPE": instance, **env}
    return plan(settings, facts(None, versions=dict(LAPTOP)))


@pytest.mark.parametrize("instance", ["trn2.48xlarge", "trn2.3xlarge", "ml.trn2.48xlarge"])
def test_plans_on_trn2_with_the_lanes_stack_and_its_own_vllms_flags(instance: str) -> None:
    p = build(instance=instance)
    assert p.stack == STACK == lanes.LANES["2.33"].stack_json()
    assert check_argv(p.argv, "0.29.0") == []  # every flag is one vLLM 0.29.0 takes (its shipped table)
    doc = json.loads(p.argv[p.argv.index("--additional-config") + 1])
    assert set(doc) == {"neuron_config"} and "--device" not in p.argv


def test_the_native_route_and_the_precompile_cache_are_rendered_not_left_to_defaults() -> None:
    env = build().env
    assert env[rules.BACKEND_VAR] == "neuron_native"
    assert env[rules.PRECOMPILE_VAR] == "1"
    assert "NEURON_COMPILED_ARTIFACTS" not in env
    # Lane 2.32 takes neither: its plugin has no native route.
    old = build("2.32").env
    assert rules.BACKEND_VAR not in old and rules.PRECOMPILE_VAR not in old


def test_the_keyed_entry_is_the_whole_vllm_cache_root_under_the_work_dir() -> None:
    p = build(NEURONSERVE_CACHE_URI="s3://bucket/cache", NEURONSERVE_WORK_DIR="/work")
    root = p.env["VLLM_CACHE_ROOT"]
    assert root == f"/work/artifacts/{p.cache_key}" == p.artifacts.local_dir
    assert p.artifacts.mode == "keyed" and p.artifacts.remote_uri == f"s3://bucket/cache/{p.cache_key}/"
    assert not any("save_sharded_checkpoint" in w for w in p.warnings)
    # 2.32 keeps its compile_cache subdirectory (its entries already published stay found).
    old = build("2.32", NEURONSERVE_CACHE_URI="s3://bucket/cache", NEURONSERVE_WORK_DIR="/work")
    assert old.artifacts.local_dir == f"{old.env['VLLM_CACHE_ROOT']}/{cache.COMPILE_CACHE_SUBDIR}"


def test_the_cache_key_differs_from_every_other_lanes_for_the_same_model() -> None:
    keys = {lane: build(lane).cache_key for lane in lanes.LANES}  # every lane runs trn2
    assert len(set(keys.values())) == len(keys), keys


def test_require_cache_hit_sets_the_plugins_no_compile_switch() -> None:
    p = build(NEURONSERVE_CACHE_URI="s3://bucket/cache", NEURONSERVE_REQUIRE_CACHE_HIT="true")
    assert p.env[cache.NO_COMPILE_VAR] == "1" and p.artifacts.require_hit


@pytest.mark.parametrize("instance", ["inf2.xlarge", "trn1.32xlarge", "trn1n.32xlarge"])
def test_inf2_and_trn1_are_refused_pointing_to_lane_2_28(instance: str) -> None:
    settings = {**BASE, "NEURONSERVE_STACK": "2.33", "NEURONSERVE_INSTANCE_TYPE": instance}
    err = refusal(settings, facts(None, versions=dict(LAPTOP)))
    assert "lane 2.33 (vllm-neuron 0.29.0.1.2.0) runs on trn2, trn2u, trn3 only" in str(err)
    assert "use lane 2.28 (NEURONSERVE_STACK=2.28" in str(err)


def test_the_installed_plugin_0_29_means_lane_2_33() -> None:
    assert lanes.lane_of_plugin("0.29.0.1.2.0") is lanes.LANES["2.33"]
    assert lanes.lane_of_plugin("0.24.0.1.1.0") is lanes.LANES["2.32"]


def test_encoder_neuron_config_is_2_33s_multimodal_namespace() -> None:
    encoder = json.dumps({"encoder_neuron_config": {"num_batched_tokens_buckets": [1024]}})
    vision = json.dumps({"vision_neuron_config": {"num_batched_tokens_buckets": [1024]}})
    p = build(SM_VLLM_ADDITIONAL_CONFIG=encoder)
    assert "encoder_neuron_config" in json.loads(p.argv[p.argv.index("--additional-config") + 1])
    settings = {**BASE, "NEURONSERVE_STACK": "2.33", "SM_VLLM_ADDITIONAL_CONFIG": vision}
    err = refusal(settings, facts(None, versions=dict(LAPTOP)))
    assert "vision_neuron_config: not in this lane" in str(err) and "encoder_neuron_config" in str(err)
    # and the reverse in lane 2.32, whose namespace is vision_neuron_config
    assert build("2.32", SM_VLLM_ADDITIONAL_CONFIG=vision)
    settings = {**settings, "NEURONSERVE_STACK": "2.32", "SM_VLLM_ADDITIONAL_CONFIG": encoder}
    assert "encoder_neuron_config" in str(refusal(settings, facts(None, versions=dict(LAPTOP))))


def test_messages_name_lane_2_33_and_its_plugin() -> None:
    settings = {**BASE, "NEURONSERVE_STACK": "2.33", "SM_VLLM_ENABLE_LORA": "true"}
    err = refusal(settings, facts(None, versions=dict(LAPTOP)))
    assert "LoRA is not in this lane (2.33) (vllm-neuron 0.29's" in str(err)
    warned = " ".join(build().warnings)
    assert "lane 2.33's default" in warned and "lane 2.32" not in warned


def test_a_users_own_route_or_precompile_switch_wins_and_is_said() -> None:
    p = build(**{rules.PRECOMPILE_VAR: "0"})
    assert p.env[rules.PRECOMPILE_VAR] == "0"
    assert any("TORCH_CACHING_PRECOMPILE=0 given" in w and "traces the model again" in w for w in p.warnings)
    p = build(**{rules.BACKEND_VAR: "neuron_native", rules.PRECOMPILE_VAR: "1"})
    assert not any("given (the plan sets" in w for w in p.warnings)
