"""Golden argv of the documented examples (TinyLlama at TP 2, Llama 3.1 8B at TP 32), and the shape of
CPU / in-tree / artifact plans. The cache key's stability: test_cachekey.py.
"""

from __future__ import annotations

import json

import pytest
from tests.support.builders import facts, plan

from neuronserve.errors import ConfigError

PY = "/usr/bin/python3"
MOD = "vllm.entrypoints.openai.api_server"


HEAD = [PY, "-m", MOD]
ENGINE = ["--host", "127.0.0.1", "--port", "8081"]
TINY = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
TINY_TP2 = {
    "SM_VLLM_MODEL": TINY,
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
    "SM_VLLM_MAX_MODEL_LEN": "128",
    "SM_VLLM_MAX_NUM_SEQS": "4",
}


def staged_argv(model: str, tp: str, max_len: str, *tail: str) -> list[str]:
    """The golden argv of a hub model (staged on Neuron) at 4 sequences in bfloat16, then `tail`."""
    return [
        *HEAD,
        "--model",
        "/tmp/neuronserve/model",  # a hub model is staged on Neuron
        "--served-model-name",
        model,
        *ENGINE,
        "--tensor-parallel-size",
        tp,
        "--max-model-len",
        max_len,
        "--max-num-seqs",
        "4",
        "--dtype",
        "bfloat16",
        *tail,
    ]


PREFIX_CACHING = ("--enable-prefix-caching", "--block-size", "32", "--num-gpu-blocks-override")
PREFIX_CONFIG = (
    "--additional-config",
    '{"override_neuron_config":{"is_block_kv_layout":true,"is_prefix_caching":true}}',
)


def test_tinyllama_tp2_contiguous() -> None:
    p = plan({**TINY_TP2, "SM_VLLM_BLOCK_SIZE": "32"})
    assert list(p.argv) == staged_argv(
        TINY, "2", "128", "--no-enable-prefix-caching", "--additional-config", '{"override_neuron_config":{}}'
    )
    assert any("SM_VLLM_BLOCK_SIZE ignored" in w for w in p.warnings)
    assert p.env["NEURON_RT_VISIBLE_CORES"] == "0-1"
    assert p.model.source == "hub" and p.model.local_path == "/tmp/neuronserve/model"


def test_tinyllama_tp2_prefix_block32() -> None:
    p = plan({**TINY_TP2, "SM_VLLM_BLOCK_SIZE": "32", "SM_VLLM_ENABLE_PREFIX_CACHING": "true"})
    assert list(p.argv) == staged_argv(TINY, "2", "128", *PREFIX_CACHING, "16", *PREFIX_CONFIG)


def test_llama31_8b_tp32_no_bucketing() -> None:
    p = plan(
        {
            "SM_VLLM_MODEL": "meta-llama/Llama-3.1-8B-Instruct",
            "SM_VLLM_TENSOR_PARALLEL_SIZE": "32",
            "SM_VLLM_MAX_MODEL_LEN": "128",
            "SM_VLLM_MAX_NUM_SEQS": "4",
            "SM_NEURON_OVERRIDE_CONFIG": '{"enable_bucketing": false}',
        },
        facts(32),
    )
    assert list(p.argv) == staged_argv(
        "meta-llama/Llama-3.1-8B-Instruct",
        "32",
        "128",
        "--no-enable-prefix-caching",
        "--additional-config",
        '{"override_neuron_config":{"enable_bucketing":false}}',
    )
    assert p.neuron_override == {"enable_bucketing": False}
    assert p.env["NEURON_RT_VISIBLE_CORES"] == "0-31"


def test_llama31_8b_tp32_refused_on_inf2_48xlarge() -> None:
    with pytest.raises(ConfigError) as err:
        plan(
            {
                "SM_VLLM_MODEL": "meta-llama/Llama-3.1-8B-Instruct",
                "SM_VLLM_TENSOR_PARALLEL_SIZE": "32",
                "SM_VLLM_MAX_MODEL_LEN": "128",
            },
            facts(24),
        )
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE=24" in str(err.value)


def test_prefix_caching_4096_blocks_of_32() -> None:
    p = plan(
        {
            **TINY_TP2,
            "SM_VLLM_MAX_MODEL_LEN": "2048",
            "SM_VLLM_ENABLE_PREFIX_CACHING": "true",
            "SM_VLLM_BLOCK_SIZE": "32",
            "SM_VLLM_NUM_GPU_BLOCKS_OVERRIDE": "4096",
        },
        facts(2),
    )
    assert list(p.argv) == staged_argv(TINY, "2", "2048", *PREFIX_CACHING, "4096", *PREFIX_CONFIG)


def test_in_tree_transformers_neuronx_dialect() -> None:
    p = plan(
        {
            **TINY_TP2,
            "VLLM_NEURON_FRAMEWORK": "transformers-neuronx",
            "SM_NEURON_CONTEXT_ENCODING_BUCKETS": "[64, 128]",
            "SM_NEURON_TOKEN_GENERATION_BUCKETS": "[128]",
        },
        facts(2, versions={"vllm": "0.10.1"}),
    )
    assert list(p.argv) == [
        *HEAD,
        "--model",
        "/tmp/neuronserve/model",  # a hub model is staged on Neuron
        "--served-model-name",
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        *ENGINE,
        "--device",
        "neuron",
        "--tensor-parallel-size",
        "2",
        "--max-model-len",
        "128",
        "--max-num-seqs",
        "4",
        "--dtype",
        "bfloat16",
        "--no-enable-prefix-caching",
        "--block-size",
        "128",
        "--override-neuron-config",
        '{"context_encoding_buckets":[64,128],"token_generation_buckets":[128]}',
    ]
    assert p.integration == "in-tree"
    assert p.env["VLLM_NEURON_FRAMEWORK"] == "transformers-neuronx"
    assert p.env["NEURON_CONTEXT_LENGTH_BUCKETS"] == "64,128"
    assert p.env["NEURON_TOKEN_GEN_BUCKETS"] == "128"


def test_in_tree_nxdi_selected_by_installed_vllm() -> None:
    p = plan(
        {
            "SM_VLLM_MODEL": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
            "SM_VLLM_MAX_MODEL_LEN": "128",
            "SM_VLLM_MAX_NUM_SEQS": "4",
            "SM_NEURON_ENABLE_BUCKETING": "false",
        },
        facts(2, versions={"vllm": "0.9.2"}),
    )
    assert p.integration == "in-tree"
    assert p.argv[p.argv.index("--device") + 1] == "neuron"
    assert json.loads(p.argv[p.argv.index("--override-neuron-config") + 1]) == {"enable_bucketing": False}
    assert p.env["VLLM_NEURON_FRAMEWORK"] == "neuronx-distributed-inference"
    assert "--additional-config" not in p.argv


def test_explicit_integration_overrides_versions() -> None:
    env = {"SM_VLLM_MODEL": "m/x", "SM_VLLM_MAX_MODEL_LEN": "128", "NEURONSERVE_INTEGRATION": "in-tree"}
    vllm_10 = facts(2, versions={"vllm": "0.10.2", "vllm-neuron": "0.2.2+lts"})
    assert plan(env, vllm_10).integration == "in-tree"
    env["NEURONSERVE_INTEGRATION"] = "plugin"
    assert plan(env, facts(2, versions={"vllm": "0.10.0"})).integration == "plugin"


def test_cpu_plan_passes_settings_and_drops_neuron_ones() -> None:
    env = {
        "SM_VLLM_MODEL": "m/x",
        "SM_VLLM_MAX_MODEL_LEN": "256",
        "SM_VLLM_DTYPE": "float32",
        "SM_VLLM_SERVED_MODEL_NAME": "tiny",
        "SM_VLLM_ENFORCE_EAGER": "true",
        "SM_VLLM_MAX_NUM_SEQS": "2",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "2",
        "SM_NEURON_ENABLE_BUCKETING": "false",
        "NEURONSERVE_CACHE_URI": "s3://b/c",
    }
    p = plan(env, facts(None), extra=["--seed", "1"], device="cpu")
    assert list(p.argv) == [
        *HEAD,
        "--model",
        "m/x",
        "--served-model-name",
        "tiny",
        *ENGINE,
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "256",
        "--max-num-seqs",
        "2",
        "--seed",
        "1",
    ]
    assert p.device == "cpu" and p.cache_key is None and p.neuron_override is None and p.env == {}
    assert p.artifacts.mode == "off"
    dropped = " ".join(p.warnings)
    for name in ("SM_VLLM_TENSOR_PARALLEL_SIZE", "SM_NEURON_ENABLE_BUCKETING", "NEURONSERVE_CACHE_URI"):
        assert name in dropped


def test_auto_device_follows_devices() -> None:
    env = {"SM_VLLM_MODEL": "m/x", "SM_VLLM_MAX_MODEL_LEN": "128"}
    assert plan(env, facts(2)).device == "neuron"
    assert plan(env, facts(None)).device == "cpu"
    assert plan({**env, "NEURONSERVE_DEVICE": "cpu"}, facts(2)).device == "cpu"


@pytest.mark.parametrize(
    ("env", "mode", "local", "remote"),
    [
        ({}, "local", "/w/artifacts/{key}", None),
        ({"NEURONSERVE_CACHE_URI": "s3://b/cache/"}, "keyed", "/w/artifacts/{key}", "s3://b/cache/{key}/"),
        ({"NEURON_COMPILED_ARTIFACTS": "s3://b/fixed/"}, "explicit", "/w/artifacts/{key}", "s3://b/fixed/"),
        ({"NEURON_COMPILED_ARTIFACTS": "/data/neff"}, "local", "/data/neff", None),
        ({"OPTION_COMPILED_GRAPH_PATH": "s3://b/lmi/"}, "explicit", "/w/artifacts/{key}", "s3://b/lmi/"),
    ],
)
def test_artifact_modes(env: dict[str, str], mode: str, local: str, remote: str | None) -> None:
    p = plan({"SM_VLLM_MODEL": "m/x", "SM_VLLM_MAX_MODEL_LEN": "128", "NEURONSERVE_WORK_DIR": "/w", **env})
    assert p.artifacts.mode == mode
    assert p.artifacts.local_dir == local.format(key=p.cache_key)
    assert p.artifacts.remote_uri == (remote.format(key=p.cache_key) if remote else None)
    assert p.env["NEURON_COMPILED_ARTIFACTS"] == p.artifacts.local_dir


def test_cache_uri_and_explicit_artifacts_conflict() -> None:
    with pytest.raises(ConfigError) as err:
        plan(
            {
                "SM_VLLM_MODEL": "m/x",
                "SM_VLLM_MAX_MODEL_LEN": "128",
                "NEURONSERVE_CACHE_URI": "s3://a/",
                "NEURON_COMPILED_ARTIFACTS": "s3://b/",
            }
        )
    assert set(err.value.variables) == {"NEURON_COMPILED_ARTIFACTS", "NEURONSERVE_CACHE_URI"}
