"""Redaction of secrets in anything neuronserve prints: env values, argv values, free text.

HF_TOKEN and AWS credentials reach the engine by inheritance and never enter the plan's env; this is
the second line of defence for what users put in SM_VLLM_* (e.g. an API key) or after `--`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

MASK = "***"
# Environment names: a secret word as the name's last word (HF_TOKEN, AWS_SESSION_TOKEN,
# AWS_SECRET_ACCESS_KEY, SM_VLLM_API_KEY, ..._PASSWORD), or before _ID (AWS_ACCESS_KEY_ID), or SECRET
# anywhere. Whole words only: SM_NEURON_TOKEN_GENERATION_BUCKETS and SM_VLLM_MAX_NUM_BATCHED_TOKENS
# are settings, and masking their values would also blank every equal number in the text.
# PASSWORD/PASSWD and SECRET are secret anywhere as a word (DB_PASSWORD_FILE). A name ending in _ARN
# holds a reference to a secret (HF_TOKEN_SECRET_ARN), which is not itself secret: it stays readable.
_SECRET_NAME = re.compile(
    r"(^|_)(TOKEN|CREDENTIALS?|KEY|APIKEY)(_ID)?$|(^|_)(SECRET|PASSWORD|PASSWD)(_|$)", re.I
)
_REFERENCE_NAME = re.compile(r"_ARN$", re.I)
# Flags: whole words only, so --tokenizer or --max-num-batched-tokens stay readable.
_SECRET_FLAG_WORD = re.compile(r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|KEY)($|_)", re.I)
_SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "--ssl-keyfile-password"})


def is_secret_name(name: str) -> bool:
    """Whether a variable's value is secret: the one rule for plan output, logs, deploy dry runs and
    the ECS task definition's `secrets`."""
    name = name.replace("-", "_")
    return bool(_SECRET_NAME.search(name)) and not _REFERENCE_NAME.search(name)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_name(k) and v else v) for k, v in env.items()}


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Mask values of secret-looking flags (`--api-key X`, `--api-key=X`, nargs=+ lists)."""
    out: list[str] = []
    masking = False
    for tok in argv:
        if tok.startswith("--"):
            name, eq, _ = tok.partition("=")
            secret = name in _SECRET_FLAGS or bool(_SECRET_FLAG_WORD.search(name[2:].replace("-", "_")))
            out.append(f"{name}={MASK}" if secret and eq else tok)
            masking = secret and not eq
        elif masking:
            out.append(MASK)
        else:
            out.append(tok)
    return out


def redact_plan_fields(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The plan's argv and env as printed or logged (one rule for `plan` and `serve`)."""
    return redact_argv(argv), redact_env(env)


def redact_text(text: str, secrets: Sequence[str]) -> str:
    for secret in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """Values of secret-named variables, to scrub from any text that might echo them."""
    return [v for k, v in environ.items() if is_secret_name(k) and v]
