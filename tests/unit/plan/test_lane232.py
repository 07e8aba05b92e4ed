"""Lane 2.32 (vllm-neuron 0.24.0.1.1.0 on vLLM 0.24.0): the same user settings in the rewritten plugin's
form, through the whole plan (build_plan): the override-key table both ways, the forbidden flags, the
compile cache's environment, the sampling mode and what requests may ask."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.support import vllm_cli
from tests.support.builders import facts, plan, refusal

from neuronserve.plan import lane232, lane232cache
from neuronserve.plan.facts import HostFacts, ModelFacts

LAPTOP = {"vllm": None, "vllm-neuron": None}
BASE = {
    "SM_VLLM_MODEL": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "NEURONSERVE_STACK": "2.32",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    "SM_VLLM_MAX_MODEL_LEN": "1024",
    "SM_VLLM_MAX_NUM_SEQS": "4",
}
# A valid value for each mappable key at BASE's launch, and where the plugin gets it.
MAPPED = {
    "context_encoding_buckets": ([128, 256, 512], "num_batched_tokens_buckets", [128, 256, 512]),
    "token_generation_buckets": ([256, 512, 1024], "decode_context_length_buckets", [256, 512]),
    "on_device_sampling_config": ({"all_greedy": True}, "on_device_sampling_config", {"all_greedy": True}),
}
REFUSED = [row for row in lane232.ROWS if row.field is None]


def laptop(**kw: Any) -> HostFacts:
    return facts(versions=dict(LAPTOP), visible_cores=2, **kw)


def build(env: dict[str, str], **kw: Any) -> Any:
    return plan({**BASE, **env}, laptop(**kw))


def refused(env: dict[str, str]) -> Any:
    return refusal({**BASE, **env}, laptop())


def neuron_config(p: Any) -> dict[str, Any]:
    argv = list(p.argv)
    doc = json.loads(argv[argv.index("--additional-config") + 1])
    assert set(doc) <= lane232.TOP_LEVEL
    return doc["neuron_config"]


def test_every_row_is_a_known_2_27_key_once_and_cites_a_doc_line() -> None:
    keys = [row.key for row in lane232.ROWS]
    assert len(keys) == len(set(keys))
    assert all(row.cite for row in lane232.ROWS)
    assert {row.key for row in lane232.ROWS if row.field} == set(MAPPED)
    assert all(row.field in lane232.FIELDS for row in lane232.ROWS if row.field)


@pytest.mark.parametrize("key", sorted(MAPPED))
def test_each_mappable_key_lands_under_its_2_32_name(key: str) -> None:
    given, field, landed = MAPPED[key]
    cfg = neuron_config(build({f"SM_NEURON_{key.upper()}": json.dumps(given)}))
    assert cfg[field] == landed
    assert key not in cfg or key == field


@pytest.mark.parametrize("key", sorted(MAPPED))
def test_each_mappable_key_lands_the_same_from_the_override_object(key: str) -> None:
    given, field, landed = MAPPED[key]
    cfg = neuron_config(build({"SM_NEURON_OVERRIDE_CONFIG": json.dumps({key: given})}))
    assert cfg[field] == landed


@pytest.mark.parametrize("row", REFUSED, ids=lambda r: r.key)
def test_each_unmappable_key_is_refused_with_the_lanes_name_for_it(row: lane232.Row) -> None:
    var = f"SM_NEURON_{row.key.upper()}"
    err = refused({var: "1"})
    text = str(err)
    assert err.variables == (var,)
    assert text.startswith(
        f"{var} sets {row.key}, an NxD Inference field that vllm-neuron 0.24 does not take"
    )
    assert row.lane_name in text and row.cite in text
    assert "not in this lane (2.32)" in text or "in lane 2.32 it is" in text


@pytest.mark.parametrize("key", ["fused_qkv", "attn_kernel_enabled", "cc_pipeline_tiling_factor"])
def test_a_key_in_no_row_is_refused_not_in_this_lane(key: str) -> None:
    var = f"SM_NEURON_{key.upper()}"
    err = refused({var: "true"})
    assert str(err).startswith(f"{var} sets {key}: not in this lane (2.32); vllm-neuron 0.24's neuron_config")
    assert err.variables == (var,)


def test_2_32_fields_given_by_their_own_names_pass_as_given() -> None:
    cfg = neuron_config(
        build(
            {
                "SM_NEURON_NUM_SEQS_BUCKETS": "[1, 2, 4]",
                "SM_VLLM_ADDITIONAL_CONFIG": json.dumps({"neuron_config": {"quantization": "mxfp8"}}),
            }
        )
    )
    assert cfg["num_seqs_buckets"] == [1, 2, 4] and cfg["quantization"] == "mxfp8"


def test_two_settings_landing_on_one_field_are_refused_naming_both() -> None:
    err = refused(
        {"SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[512]", "SM_NEURON_NUM_BATCHED_TOKENS_BUCKETS": "[512]"}
    )
    assert set(err.variables) == {
        "SM_NEURON_CONTEXT_ENCODING_BUCKETS",
        "SM_NEURON_NUM_BATCHED_TOKENS_BUCKETS",
    }
    assert "both set neuron_config num_batched_tokens_buckets" in str(err)


def test_an_unknown_additional_config_key_is_refused() -> None:
    err = refused({"SM_VLLM_ADDITIONAL_CONFIG": json.dumps({"max_prompt_length": 512})})
    assert "max_prompt_length: not in this lane (2.32)" in str(err)


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"SM_NEURON_NUM_SEQS_BUCKETS": "[1, 2]"}, "its largest must equal max_num_seqs 4"),
        (
            {"SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[128, 256]", "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512"},
            "512",
        ),
        ({"SM_NEURON_TOKEN_GENERATION_BUCKETS": "[200, 1024]"}, "multiples of 128"),
        ({"SM_NEURON_KV_SEGMENT_SIZE_BUCKETS": "[1000]"}, "divisible by block_size 32"),
        ({"SM_NEURON_NUM_SEQS_BUCKETS": "[4, 2]"}, "strictly ascending"),
    ],
)
def test_bucket_rules_are_checked_before_the_compile(env: dict[str, str], words: str) -> None:
    assert words in str(refused(env))


def test_no_nxd_inference_flags_or_environment_even_when_2_27_would_set_them() -> None:
    p = build({"SM_VLLM_ENABLE_CHUNKED_PREFILL": "true", "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "512"})
    argv = list(p.argv)
    for flag in (
        "--device",
        "--num-gpu-blocks-override",
        "--override-neuron-config",
        "--enable-chunked-prefill",
    ):
        assert flag not in argv
    for name in ("VLLM_NEURON_FRAMEWORK", "NEURON_COMPILED_ARTIFACTS", "DISABLE_NEURON_CUSTOM_SCHEDULER"):
        assert name not in p.env
    assert argv[argv.index("--max-num-batched-tokens") + 1] == "512"
    assert any("SM_VLLM_ENABLE_CHUNKED_PREFILL ignored in lane 2.32" in w for w in p.warnings)
    assert p.integration == "native"


def test_a_users_num_gpu_blocks_override_is_passed_on_and_said() -> None:
    p = build({"SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "512"})
    argv = list(p.argv)
    assert argv[argv.index("--num-gpu-blocks-override") + 1] == "512"
    assert any(w.startswith("SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE=512 passed on") for w in p.warnings)


@pytest.mark.parametrize(
    ("given", "flag"),
    [
        (None, "--enable-prefix-caching"),
        ("true", "--enable-prefix-caching"),
        ("false", "--no-enable-prefix-caching"),
    ],
)
def test_prefix_caching_and_block_size_are_explicit(given: str | None, flag: str) -> None:
    env = {} if given is None else {"SM_VLLM_ENABLE_PREFIX_CACHING": given}
    p = build(env)
    argv = list(p.argv)
    assert flag in argv and argv[argv.index("--block-size") + 1] == "32"
    assert any(w.startswith("prefix caching on (lane 2.32's default") for w in p.warnings) == (given is None)


def test_sampling_is_on_the_cpu_unless_configured_and_requests_follow_it() -> None:
    cpu = build({})
    assert neuron_config(cpu)["on_device_sampling_config"] is None
    assert "--no-async-scheduling" in cpu.argv
    rs = cpu.request_support
    assert (rs.logprobs, rs.penalties, rs.structured_outputs, rs.prompt_logprobs) == (
        True,
        True,
        False,
        False,
    )
    assert "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG" in rs.why["structured_outputs"]

    dev = build({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"temperature": "0"}'})
    assert "--no-async-scheduling" not in dev.argv
    rs = dev.request_support
    assert (rs.logprobs, rs.penalties, rs.structured_outputs, rs.prompt_logprobs) == (
        False,
        False,
        True,
        False,
    )
    assert "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG=null" in rs.why["logprobs"]


def test_nxd_inference_sampling_keys_are_refused_naming_the_2_32_keys() -> None:
    err = refused({"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"dynamic": true, "global_topk": 64}'})
    assert "dynamic, global_topk not in this lane (2.32)" in str(err)
    assert "all_greedy, temperature, top_k, top_p" in str(err)


def test_speculation_needs_on_device_sampling_and_keys_the_draft() -> None:
    spec = json.dumps({"method": "eagle3", "model": "/d", "num_speculative_tokens": 3})
    draft = {
        "/d": ModelFacts("dir", {"architectures": ["LlamaForCausalLMEagle3"]}, "e" * 64, weights_digest="w")
    }
    err = refusal({**BASE, "SM_VLLM_SPECULATIVE_CONFIG": spec}, laptop(paths=draft))
    assert "needs on-device sampling in lane 2.32" in str(err)
    assert "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG" in err.variables
    env = {"SM_VLLM_SPECULATIVE_CONFIG": spec, "SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"temperature": "0"}'}
    p = build(env, paths=draft)
    assert "--no-async-scheduling" not in p.argv  # the plugin turns it off itself with speculation
    other = {
        "/d": ModelFacts("dir", {"architectures": ["LlamaForCausalLMEagle3"]}, "f" * 64, weights_digest="w")
    }
    assert build(env, paths=other).cache_key != p.cache_key


def test_neuron_quant_is_refused_naming_the_neuron_config_field() -> None:
    err = refused({"SM_VLLM_QUANTIZATION": "neuron_quant"})
    assert "not in this lane (2.32)" in str(err) and "SM_NEURON_QUANTIZATION" in str(err)
    assert err.variables == ("SM_VLLM_QUANTIZATION",)


def test_lora_is_refused_not_in_this_lane() -> None:
    err = refused({"SM_VLLM_ENABLE_LORA": "true"})
    assert "LoRA is not in this lane (2.32)" in str(err) and "NEURONSERVE_STACK=2.28" in str(err)


def test_the_keyed_cache_points_at_vllm_cache_root_compile_cache() -> None:
    p = build({"NEURONSERVE_CACHE_URI": "s3://bucket/cache"})
    local = p.artifacts.local_dir
    assert p.artifacts.mode == "keyed" and p.artifacts.remote_uri == f"s3://bucket/cache/{p.cache_key}/"
    assert local == f"{p.env['VLLM_CACHE_ROOT']}/{lane232cache.COMPILE_CACHE_SUBDIR}"
    assert p.cache_key in p.env["VLLM_CACHE_ROOT"]
    assert "NEURON_COMPILED_ARTIFACTS" not in p.env and lane232cache.NO_COMPILE_VAR not in p.env
    assert not any("save_sharded_checkpoint" in w for w in p.warnings)


def test_the_key_differs_from_lane_2_27s_for_the_same_settings() -> None:
    env = {k: v for k, v in BASE.items() if k != "NEURONSERVE_STACK"}
    assert build({}).cache_key != plan(env, laptop()).cache_key


def test_require_cache_hit_turns_on_the_plugins_no_compile_switch() -> None:
    env = {"NEURONSERVE_CACHE_URI": "s3://bucket/cache", "NEURONSERVE_REQUIRE_CACHE_HIT": "true"}
    p = build(env)
    assert p.env[lane232cache.NO_COMPILE_VAR] == "1" and p.artifacts.require_hit
    err = refused({**env, lane232cache.DISABLE_CACHE_VAR: "1"})
    assert set(err.variables) == {"NEURONSERVE_REQUIRE_CACHE_HIT", lane232cache.DISABLE_CACHE_VAR}


def test_an_s3_remote_cache_is_refused_and_a_mounted_path_passes() -> None:
    err = refused({lane232cache.REMOTE_VAR: "s3://bucket/x"})
    assert err.variables == (lane232cache.REMOTE_VAR, "NEURONSERVE_CACHE_URI")
    assert build({lane232cache.REMOTE_VAR: "/mnt/fsx/cache"}).env.get("VLLM_CACHE_ROOT")


def test_a_local_neuron_compiled_artifacts_is_refused_and_s3_is_staged_into_the_compile_cache() -> None:
    err = refused({"NEURON_COMPILED_ARTIFACTS": "/opt/compiled"})
    assert "does not read it (vllm-project/vllm-neuron#38)" in str(err)
    assert err.variables == ("NEURON_COMPILED_ARTIFACTS", "NEURONSERVE_CACHE_URI")
    p = build({"NEURON_COMPILED_ARTIFACTS": "s3://bucket/compiled/"})
    assert p.artifacts.mode == "explicit"
    assert p.artifacts.local_dir.endswith("/" + lane232cache.COMPILE_CACHE_SUBDIR)


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"SM_NEURON_ON_DEVICE_SAMPLING_CONFIG": '{"all_greedy": true}'},
        {"SM_VLLM_ENABLE_PREFIX_CACHING": "false", "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "256"},
        {"SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[128, 1024]", "SM_VLLM_BLOCK_SIZE": "64"},
        {"SM_VLLM_ENABLE_CHUNKED_PREFILL": "true", "SM_VLLM_KV_CACHE_DTYPE": "fp8"},
    ],
)
def test_the_argv_is_valid_against_vllm_0_24_0s_cli(env: dict[str, str]) -> None:
    argv = list(build(env).argv)
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert vllm_cli.check_argv(argv, "0.24.0") == []


def test_the_cli_check_refuses_the_flags_this_lane_must_not_render() -> None:
    bad = vllm_cli.check_argv(["--device", "neuron", "--override-neuron-config", "{}"], "0.24.0")
    assert len(bad) == 2


def test_token_generation_buckets_of_only_max_model_len_leave_context_bucketing_off() -> None:
    cfg = neuron_config(build({"SM_NEURON_TOKEN_GENERATION_BUCKETS": "[1024]"}))
    assert cfg["decode_context_length_buckets"] is None


def test_the_2_27_sampling_switch_is_refused_unless_zero() -> None:
    err = refused({"NEURON_ON_DEVICE_SAMPLING_DISABLED": "1"})
    assert "not in this lane (2.32)" in str(err)
    assert err.variables == ("NEURON_ON_DEVICE_SAMPLING_DISABLED",)
    assert build({"NEURON_ON_DEVICE_SAMPLING_DISABLED": "0"}).env["VLLM_CACHE_ROOT"]


def test_a_disabled_plugin_cache_with_an_s3_cache_is_said() -> None:
    p = build({"NEURONSERVE_CACHE_URI": "s3://bucket/cache", lane232cache.DISABLE_CACHE_VAR: "1"})
    assert any(
        w.startswith(f"{lane232cache.DISABLE_CACHE_VAR} is set: the engine writes no") for w in p.warnings
    )
    assert lane232cache.NO_COMPILE_VAR not in p.env
