"""Lane 2.32's translation of the user's NxD Inference keys (plan/lanes/native/translate.py), through the
whole plan (build_plan): the override-key table both ways, keys in no row, two settings on one field,
the top-level keys and the bucket rules.
"""

from __future__ import annotations

import json

import pytest
from tests.support.native_lane import build, neuron_config, refused

from neuronserve.plan.lanes.native import translate

# A valid value for each mappable key at BASE's launch, and where the plugin gets it.
MAPPED = {
    "context_encoding_buckets": ([128, 256, 512], "num_batched_tokens_buckets", [128, 256, 512]),
    "token_generation_buckets": ([256, 512, 1024], "decode_context_length_buckets", [256, 512]),
    "on_device_sampling_config": ({"all_greedy": True}, "on_device_sampling_config", {"all_greedy": True}),
}
REFUSED = [row for row in translate.ROWS if row.field is None]


def test_every_row_is_a_known_2_27_key_once_and_cites_a_doc_line() -> None:
    keys = [row.key for row in translate.ROWS]
    assert len(keys) == len(set(keys))
    assert all(row.cite for row in translate.ROWS)
    assert {row.key for row in translate.ROWS if row.field} == set(MAPPED)
    assert all(row.field in translate.FIELDS for row in translate.ROWS if row.field)


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
def test_each_unmappable_key_is_refused_with_the_lanes_name_for_it(row: translate.Row) -> None:
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


def test_token_generation_buckets_of_only_max_model_len_leave_context_bucketing_off() -> None:
    cfg = neuron_config(build({"SM_NEURON_TOKEN_GENERATION_BUCKETS": "[1024]"}))
    assert cfg["decode_context_length_buckets"] is None
