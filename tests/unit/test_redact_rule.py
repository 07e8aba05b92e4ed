"""Redaction (redact.py), by behaviour: one rule for which names are secret, applied to env values, argv
values and free text, with the settings whose names merely contain a secret word left readable."""

from __future__ import annotations

import pytest

from neuronserve.redact import (
    MASK,
    is_secret_name,
    redact_argv,
    redact_env,
    redact_plan_fields,
    redact_text,
    secret_values,
)


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "AWS_SESSION_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "SM_VLLM_API_KEY",
        "DB_PASSWORD",
        "DB_PASSWORD_FILE",
        "MY_SECRET_THING",
        "token",
        "SM_VLLM_SSL_KEYFILE_PASSWORD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "x-api-key",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN_SECRET_ARN",  # a reference to a secret, not one
        "SM_NEURON_TOKEN_GENERATION_BUCKETS",
        "SM_VLLM_MAX_NUM_BATCHED_TOKENS",
        "SM_VLLM_TOKENIZER",
        "KEYBOARD",
        "MONKEY",
        "SM_VLLM_MODEL",
    ],
)
def test_settings_that_only_contain_a_word_stay_readable(name: str) -> None:
    assert not is_secret_name(name)


def test_env_values_are_masked_by_name_and_empty_ones_left() -> None:
    env = {"HF_TOKEN": "hf_x", "AWS_SESSION_TOKEN": "", "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "4096"}
    assert redact_env(env) == {
        "HF_TOKEN": MASK,
        "AWS_SESSION_TOKEN": "",
        "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "4096",
    }


def test_argv_values_of_secret_flags_are_masked_in_every_spelling() -> None:
    argv = [
        "python",
        "--api-key",
        "sk-1",
        "sk-2",  # nargs=+: every value until the next flag
        "--tokenizer",
        "/t",
        "--hf-token=hf_abc",
        "--max-num-batched-tokens",
        "8192",
        "--ssl-keyfile-password",
        "pw",
        "--x-secret-value",
        "s",
    ]
    assert redact_argv(argv) == [
        "python",
        "--api-key",
        MASK,
        MASK,
        "--tokenizer",
        "/t",
        f"--hf-token={MASK}",
        "--max-num-batched-tokens",
        "8192",
        "--ssl-keyfile-password",
        MASK,
        "--x-secret-value",
        MASK,
    ]
    assert redact_plan_fields(["--api-key", "k"], {"HF_TOKEN": "t"}) == (
        ["--api-key", MASK],
        {"HF_TOKEN": MASK},
    )


def test_free_text_loses_every_secret_value_longest_first() -> None:
    environ = {
        "HF_TOKEN": "hf_abcdef",
        "AWS_SECRET_ACCESS_KEY": "hf_abcdef_longer",
        "SM_VLLM_MODEL": "m",
        "SECRET": "abc",
    }
    secrets = secret_values(environ)
    assert sorted(secrets) == ["abc", "hf_abcdef", "hf_abcdef_longer"]
    text = "token hf_abcdef, key hf_abcdef_longer, model m, abc"
    assert redact_text(text, secrets) == f"token {MASK}, key {MASK}, model m, abc"  # under 4 chars: kept
