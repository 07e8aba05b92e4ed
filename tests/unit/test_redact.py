"""redact.py: one rule decides which names hold secrets, and their values never reach plan output, logs
or rendered manifests: masked in environments, in argv (both `--flag value` and `--flag=value`, lists
too) and in free text."""

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
        "GOOGLE_APPLICATION_CREDENTIALS",
        "api-key",
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
        "NEURONSERVE_CACHE_URI",
    ],
)
def test_setting_names_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_an_environment_keeps_its_names_and_masks_secret_values() -> None:
    env = {"HF_TOKEN": "hf_x", "AWS_ACCESS_KEY_ID": "", "SM_VLLM_MAX_NUM_SEQS": "8"}
    assert redact_env(env) == {"HF_TOKEN": MASK, "AWS_ACCESS_KEY_ID": "", "SM_VLLM_MAX_NUM_SEQS": "8"}


def test_argv_masks_secret_flag_values_in_every_form() -> None:
    argv = ["--api-key", "k1", "--api-key=k2", "--hf-token", "t", "--model", "m", "--tokenizer", "tok"]
    assert redact_argv(argv) == [
        "--api-key",
        MASK,
        f"--api-key={MASK}",
        "--hf-token",
        MASK,
        "--model",
        "m",
        "--tokenizer",
        "tok",
    ]
    assert redact_argv(["--ssl-keyfile-password", "a", "b", "--port", "1"]) == [
        "--ssl-keyfile-password",
        MASK,
        MASK,
        "--port",
        "1",
    ]


def test_plan_fields_are_redacted_together() -> None:
    argv, env = redact_plan_fields(["--api-key", "k"], {"HF_TOKEN": "t"})
    assert (argv, env) == (["--api-key", MASK], {"HF_TOKEN": MASK})


def test_text_loses_every_secret_value_longest_first_and_short_values_stay() -> None:
    environ = {"HF_TOKEN": "hf_abcdef", "SM_VLLM_API_KEY": "hf_abcdef-extra", "DB_PASSWORD": "abc"}
    secrets = secret_values(environ)
    assert sorted(secrets) == ["abc", "hf_abcdef", "hf_abcdef-extra"]
    text = "token hf_abcdef-extra then hf_abcdef, and abc stays (too short to mask safely)"
    assert redact_text(text, secrets) == f"token {MASK} then {MASK}, and abc stays (too short to mask safely)"
