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
        "token",
        "SM_VLLM_SSL_KEYFILE_PASSWORD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "api-key",
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
        "NEURONSERVE_CACHE_URI",
    ],
)
def test_setting_names_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_an_environment_keeps_its_names_and_masks_secret_values() -> None:
    env = {"AWS_ACCESS_KEY_ID": "", "AWS_SESSION_TOKEN": "", "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "4096"}
    assert redact_env({"HF_TOKEN": "hf_x", **env}) == {"HF_TOKEN": MASK, **env}


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


def test_plan_fields_are_redacted_together() -> None:
    argv, env = redact_plan_fields(["--api-key", "k"], {"HF_TOKEN": "t"})
    assert (argv, env) == (["--api-key", MASK], {"HF_TOKEN": MASK})


def test_text_loses_every_secret_value_longest_first_and_short_values_stay() -> None:
    environ = {"HF_TOKEN": "hf_abcdef", "SM_VLLM_API_KEY": "hf_abcdef-extra", "DB_PASSWORD": "abc"}
    secrets = secret_values(environ)
    assert sorted(secrets) == ["abc", "hf_abcdef", "hf_abcdef-extra"]
    text = "token hf_abcdef-extra then hf_abcdef, and abc stays (too short to mask safely)"
    assert redact_text(text, secrets) == f"token {MASK} then {MASK}, and abc stays (too short to mask safely)"
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
