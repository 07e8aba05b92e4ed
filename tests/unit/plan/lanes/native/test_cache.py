"""Lane 2.32's compile cache (plan/lanes/native/cache.py), through the whole plan: the keyed cache under
VLLM_CACHE_ROOT, the plugin's no-compile switch, its remote cache and NEURON_COMPILED_ARTIFACTS.
"""

from __future__ import annotations

from tests.support.builders import plan
from tests.support.native_lane import BASE, build, laptop, refused

from neuronserve.plan.lanes.native import cache


def test_the_keyed_cache_points_at_vllm_cache_root_compile_cache() -> None:
    p = build({"NEURONSERVE_CACHE_URI": "s3://bucket/cache"})
    local = p.artifacts.local_dir
    assert p.artifacts.mode == "keyed" and p.artifacts.remote_uri == f"s3://bucket/cache/{p.cache_key}/"
    assert local == f"{p.env['VLLM_CACHE_ROOT']}/{cache.COMPILE_CACHE_SUBDIR}"
    assert p.cache_key in p.env["VLLM_CACHE_ROOT"]
    assert "NEURON_COMPILED_ARTIFACTS" not in p.env and cache.NO_COMPILE_VAR not in p.env
    assert not any("save_sharded_checkpoint" in w for w in p.warnings)


def test_the_key_differs_from_lane_2_27s_for_the_same_settings() -> None:
    env = {k: v for k, v in BASE.items() if k != "NEURONSERVE_STACK"}
    assert build({}).cache_key != plan(env, laptop()).cache_key


def test_require_cache_hit_turns_on_the_plugins_no_compile_switch() -> None:
    env = {"NEURONSERVE_CACHE_URI": "s3://bucket/cache", "NEURONSERVE_REQUIRE_CACHE_HIT": "true"}
    p = build(env)
    assert p.env[cache.NO_COMPILE_VAR] == "1" and p.artifacts.require_hit
    err = refused({**env, cache.DISABLE_CACHE_VAR: "1"})
    assert set(err.variables) == {"NEURONSERVE_REQUIRE_CACHE_HIT", cache.DISABLE_CACHE_VAR}


def test_an_s3_remote_cache_is_refused_and_a_mounted_path_passes() -> None:
    err = refused({cache.REMOTE_VAR: "s3://bucket/x"})
    assert err.variables == (cache.REMOTE_VAR, "NEURONSERVE_CACHE_URI")
    assert build({cache.REMOTE_VAR: "/mnt/fsx/cache"}).env.get("VLLM_CACHE_ROOT")


def test_a_local_neuron_compiled_artifacts_is_refused_and_s3_is_staged_into_the_compile_cache() -> None:
    err = refused({"NEURON_COMPILED_ARTIFACTS": "/opt/compiled"})
    assert "does not read it (vllm-project/vllm-neuron#38)" in str(err)
    assert err.variables == ("NEURON_COMPILED_ARTIFACTS", "NEURONSERVE_CACHE_URI")
    p = build({"NEURON_COMPILED_ARTIFACTS": "s3://bucket/compiled/"})
    assert p.artifacts.mode == "explicit"
    assert p.artifacts.local_dir.endswith("/" + cache.COMPILE_CACHE_SUBDIR)


def test_a_disabled_plugin_cache_with_an_s3_cache_is_said() -> None:
    p = build({"NEURONSERVE_CACHE_URI": "s3://bucket/cache", cache.DISABLE_CACHE_VAR: "1"})
    assert any(w.startswith(f"{cache.DISABLE_CACHE_VAR} is set: the engine writes no") for w in p.warnings)
    assert cache.NO_COMPILE_VAR not in p.env
