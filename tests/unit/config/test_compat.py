"""config/compat.py: the names users bring from DJL LMI (`OPTION_*`, serving.properties) and TGI/HF, each
mapped onto its engine setting with its value normalised, and unknown LMI keys warned by name."""

from __future__ import annotations

import pytest

from neuronserve.config.settings import parse_settings


@pytest.mark.parametrize(
    ("env", "key", "value", "origin"),
    [
        (
            {"OPTION_TENSOR_PARALLEL_DEGREE": "4"},
            "tensor-parallel-size",
            "4",
            "OPTION_TENSOR_PARALLEL_DEGREE",
        ),
        (
            {"OPTION_TENSOR_PARALLEL_DEGREE": "max"},
            "tensor-parallel-size",
            "max",
            "OPTION_TENSOR_PARALLEL_DEGREE",
        ),
        ({"TENSOR_PARALLEL_DEGREE": "2"}, "tensor-parallel-size", "2", "TENSOR_PARALLEL_DEGREE"),
        ({"OPTION_MAX_ROLLING_BATCH_SIZE": "8"}, "max-num-seqs", "8", "OPTION_MAX_ROLLING_BATCH_SIZE"),
        ({"OPTION_N_POSITIONS": "2048"}, "max-model-len", "2048", "OPTION_N_POSITIONS"),
        ({"OPTION_MAX_MODEL_LEN": "1024"}, "max-model-len", "1024", "OPTION_MAX_MODEL_LEN"),
        ({"OPTION_DTYPE": "bf16"}, "dtype", "bfloat16", "OPTION_DTYPE"),
        ({"OPTION_DTYPE": "fp16"}, "dtype", "float16", "OPTION_DTYPE"),
        ({"OPTION_TRUST_REMOTE_CODE": "true"}, "trust-remote-code", True, "OPTION_TRUST_REMOTE_CODE"),
        ({"HF_MODEL_REVISION": "main"}, "revision", "main", "HF_MODEL_REVISION"),
        ({"HF_REVISION": "v2"}, "revision", "v2", "HF_REVISION"),
        ({"OPTION_REVISION": "v3"}, "revision", "v3", "OPTION_REVISION"),
        ({"HF_MODEL_TRUST_REMOTE_CODE": "false"}, "trust-remote-code", False, "HF_MODEL_TRUST_REMOTE_CODE"),
        ({"HF_NUM_CORES": "2"}, "tensor-parallel-size", "2", "HF_NUM_CORES"),
        ({"MAX_BATCH_SIZE": "4"}, "max-num-seqs", "4", "MAX_BATCH_SIZE"),
        ({"MAX_TOTAL_TOKENS": "4096"}, "max-model-len", "4096", "MAX_TOTAL_TOKENS"),
        ({"HF_AUTO_CAST_TYPE": "bf16"}, "dtype", "bfloat16", "HF_AUTO_CAST_TYPE"),
        ({}, "max-model-len", "512", "serving.properties option.n_positions"),
    ],
)
def test_compat_mapping(env: dict[str, str], key: str, value: object, origin: str) -> None:
    props = {"option.n_positions": "512", "engine": "Python"} if not env else {}
    s = parse_settings(env, serving_properties=props)
    assert s.engine[key].value == value and s.engine[key].origin == origin


def test_unknown_option_keys_warned_by_name() -> None:
    s = parse_settings(
        {"OPTION_ROLLING_BATCH": "vllm", "OPTION_FOO_BAR": "1"}, serving_properties={"option.weird": "x"}
    )
    assert any("OPTION_FOO_BAR" in w and "option.weird" in w and "ROLLING" not in w for w in s.warnings)
    assert parse_settings({"OPTION_ROLLING_BATCH": "vllm"}).warnings == ()


def test_unknown_option_keys_are_one_warning_listing_each_origin() -> None:
    s = parse_settings({"OPTION_FOO": "1", "OPTION_BAR": "2"}, serving_properties={"option.weird": "x"})
    assert s.warnings == (
        "ignored unknown LMI settings (no vLLM-on-Neuron equivalent): "
        "serving.properties option.weird, OPTION_BAR, OPTION_FOO",
    )
