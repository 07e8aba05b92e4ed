"""Secrets at deploy time: which variables are secret, how their values are masked in what the tools
print, and the references (ARNs) that replace them.

One rule decides what is secret: `redact.is_secret_name` (HF_TOKEN, *_TOKEN, *_KEY, *_SECRET*,
*PASSWORD*, AWS keys), the same rule the container's plan output and logs use. `masked_json` applies
it to any request document a tool prints (`sagemaker/deploy.py --dry-run`, `update.py --dry-run`,
`ecs/render.py`, `neuronserve deploy k8s`): SageMaker's `Environment` map and ECS's `environment` list
get `***` for each secret value, and then every secret value is scrubbed from the whole text, wherever
else it might appear.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.host.secrets import SECRETS_MANAGER_ARN
from neuronserve.redact import MASK, is_secret_name, redact_env, redact_text, secret_values

# What ECS's `secrets[].valueFrom` takes (RegisterTaskDefinition, `Secret.valueFrom`): a Secrets
# Manager secret ARN (optionally `:json-key:version-stage:version-id` after it) or an SSM Parameter
# Store parameter ARN.
SSM_PARAMETER_ARN = re.compile(r"arn:aws(?:-[a-z]+)*:ssm:[a-z]{2}(?:-[a-z]+)+-\d+:\d{12}:parameter/\S+")
_ECS_SECRET_ARN = re.compile(rf"{SECRETS_MANAGER_ARN.pattern}(?::[^:\s]*){{0,3}}")


def clear_secrets(env: Mapping[str, str]) -> list[str]:
    """Names of secret variables given a value in clear, sorted."""
    return sorted(name for name, value in env.items() if value and is_secret_name(name))


def mask_doc(doc: Any) -> Any:
    """A copy of a request document with secret values masked (Environment maps, environment lists)."""
    if isinstance(doc, list):
        return [mask_doc(item) for item in doc]
    if not isinstance(doc, dict):
        return doc
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "Environment" and isinstance(value, dict):
            out[key] = redact_env(value)
        elif key == "environment" and isinstance(value, list):
            out[key] = [_mask_pair(pair) for pair in value]
        else:
            out[key] = mask_doc(value)
    return out


def _mask_pair(pair: Any) -> Any:
    if isinstance(pair, dict) and is_secret_name(str(pair.get("name", ""))) and pair.get("value"):
        return {**pair, "value": MASK}
    return pair


def masked_json(doc: Any, env: Mapping[str, str]) -> str:
    """`doc` as printed: masked structurally, then every secret value of `env` scrubbed from the text."""
    return redact_text(json.dumps(mask_doc(doc), indent=2), secret_values(env))


def masked_text(text: str, env: Mapping[str, str]) -> str:
    """Free text (an error, a warning) with every secret value of `env` scrubbed."""
    return redact_text(text, secret_values(env))


def parse_secret_refs(items: Iterable[str]) -> dict[str, str]:
    """`--secret NAME=ARN` flags: each a variable name and a Secrets Manager or SSM parameter ARN."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, arn = item.partition("=")
        name, arn = name.strip(), arn.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ConfigError(f"--secret: expected NAME=ARN, e.g. --secret {_EXAMPLE}")
        if not (_ECS_SECRET_ARN.fullmatch(arn) or SSM_PARAMETER_ARN.fullmatch(arn)):
            raise ConfigError(
                f"--secret {name}: the value must be a Secrets Manager secret ARN "
                "(arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME) or an SSM parameter ARN "
                "(arn:aws:ssm:REGION:ACCOUNT:parameter/NAME), not the secret itself"
            )
        out[name] = arn
    return out


_EXAMPLE = "HF_TOKEN=arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME"


def refuse_clear_secrets(
    env: Mapping[str, str],
    references: Mapping[str, object],
    where: str = "the task definition's environment",
    how: str = "--secret {name}=arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME",
) -> None:
    """A secret value in what a deploy tool writes (ECS's task definition `environment`, an EKS
    ConfigMap: `where`) is plain text for anyone who can read it back; refuse it and say how to pass a
    reference (`how`, with `{name}`). Names in both places are refused too."""
    both = sorted(set(env) & set(references))
    if both:
        raise ConfigError(f"{', '.join(both)}: given both as --env and as --secret: keep only --secret")
    clear = clear_secrets(env)
    if clear:
        first = "HF_TOKEN" if "HF_TOKEN" in clear else clear[0]
        raise ConfigError(
            f"{', '.join(clear)}: a secret value would be stored in plain text in {where}; store it as a "
            f"secret and pass {how.format(name=first)} instead (docs/DEPLOY.md, 'Secrets')",
            tuple(clear),
        )
