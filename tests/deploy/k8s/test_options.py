"""The renderer's own choices (deploy/k8s/options.py): Kubernetes names, replica bounds, secret
references; a secret value is never echoed back."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from k8s_support import options

from neuronserve.deploy.k8s.options import NAME_MAX, SecretRef, parse_secrets
from neuronserve.errors import ConfigError

ARN = "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf-token-AbCdEf"


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"name": "Llama"}, "--name 'Llama'"),
        ({"name": "a" * (NAME_MAX + 1)}, f"at most {NAME_MAX} characters"),
        ({"namespace": "-x"}, "--namespace"),
        ({"image": "two words"}, "--image"),
        ({"role_arn": "arn:aws:iam::123:role/x"}, "--role-arn"),
        ({"replicas": 0}, "--replicas 0"),
        ({"min_replicas": 0}, "no scale to zero"),
        ({"min_replicas": 5, "max_replicas": 4}, "need 1 <= min <= max"),
        ({"target_queue": 0}, "--target-queue 0"),
        ({"prestop_s": 600}, "--prestop-seconds 600"),
        ({"prometheus_url": "prometheus:9090"}, "--prometheus-url"),
    ],
)
def test_option_refusals_name_the_flag(change: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        dataclasses.replace(options(), **change).check()
    options().check()  # the defaults pass


def test_secret_references() -> None:
    refs, arn = parse_secrets(
        ["SM_VLLM_API_KEY=vllm-keys/api", f"HF_TOKEN={ARN}", "DB_PASSWORD = db.creds/pw_1"]
    )
    assert refs == {
        "SM_VLLM_API_KEY": SecretRef("vllm-keys", "api"),
        "DB_PASSWORD": SecretRef("db.creds", "pw_1"),
    }
    assert arn == ARN


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        ("HF_TOKEN=hf_secretvalue0123456789", "not the secret itself"),
        ("hf_secretvalue0123456789", "expected NAME=SECRET/KEY"),
        (f"SM_VLLM_API_KEY={ARN}", "only HF_TOKEN is read from Secrets Manager"),
        ("HF_TOKEN=arn:aws:ssm:us-west-2:123456789012:parameter/x", "not a Secrets Manager secret ARN"),
        ("X=Secret/key", "SECRET/KEY"),
    ],
)
def test_secret_refusals_hide_the_value(item: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as err:
        parse_secrets([item])
    assert "hf_secretvalue0123456789" not in str(err.value)


def test_a_secret_given_twice() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        parse_secrets(["A=s/k", "A=s/j"])
