"""The choices of `neuronserve deploy k8s` beyond the environment, checked before anything is rendered.

Names follow Kubernetes' own rules (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/):
object names and the namespace are DNS-1123 labels (the Service's name becomes a DNS label, the
compile Job's name a pod label value, both at most 63 characters). Secrets come two ways, never in clear
(deploy/secrets.py refuses a secret value in the environment): `--secret NAME=SECRET/KEY` reads a key
of a Kubernetes Secret (`secretKeyRef`), and `--secret HF_TOKEN=arn:aws:secretsmanager:...` puts the
ARN in HF_TOKEN_SECRET_ARN, which the container resolves itself at start with the pod's IRSA role
(host/secrets.py); other variables have no such reader, so an ARN for them is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from neuronserve.deploy.k8s.resources import NeuronResource
from neuronserve.errors import ConfigError
from neuronserve.host.secrets import ARN_VAR, TOKEN_VAR, check_arn

Autoscaler = Literal["keda", "hpa", "none"]
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IAM_ROLE = re.compile(r"arn:aws(?:-[a-z]+)*:iam::\d{12}:role/[\w+=,.@/-]+")
# The longest suffix a name gets: "-compile-" + 8 hex digits (the Job), under a label's 63 characters.
NAME_MAX = 63 - len("-compile-") - 8


@dataclass(frozen=True)
class SecretRef:
    secret: str  # a Kubernetes Secret's name
    key: str  # the key in it


@dataclass(frozen=True)
class K8sOptions:
    image: str
    instance_type: str
    name: str = "neuronserve"
    namespace: str = "default"
    replicas: int = 1
    neuron_resource: NeuronResource = "neuroncore"
    scheduler_name: str = "my-scheduler"  # the Neuron Helm chart's scheduler (k8s-multiple-scheduler.html)
    role_arn: str | None = None  # IRSA: the ServiceAccount's eks.amazonaws.com/role-arn
    autoscaler: Autoscaler = "none"
    min_replicas: int = 1
    max_replicas: int = 4
    prometheus_url: str = "http://prometheus-server.monitoring.svc.cluster.local:80"
    target_in_flight: int | None = None  # None: the plan's batch (max_num_seqs x DP)
    target_queue: int | None = None  # None: a quarter of that batch, at least 1
    prestop_s: int = 15
    compile_job: bool = True
    secret_refs: dict[str, SecretRef] = field(default_factory=dict)
    token_arn: str | None = None  # HF_TOKEN from Secrets Manager (HF_TOKEN_SECRET_ARN)
    model_config: str | None = None  # --model-config: the model's config.json, for the HBM fit at render

    def check(self) -> None:
        """Every option within what Kubernetes and the autoscalers take; the first problem wins."""
        if not self.image or any(c.isspace() for c in self.image):
            raise ConfigError(
                f"--image {self.image!r}: an image reference, e.g. "
                "ACCOUNT.dkr.ecr.REGION.amazonaws.com/neuronserve:TAG"
            )
        for flag, value, limit in (("--name", self.name, NAME_MAX), ("--namespace", self.namespace, 63)):
            if not _LABEL.fullmatch(value) or len(value) > limit:
                raise ConfigError(
                    f"{flag} {value!r}: lowercase letters, digits and '-' (not first or last), at most "
                    f"{limit} characters (a DNS-1123 label)"
                )
        if self.role_arn is not None and not _IAM_ROLE.fullmatch(self.role_arn):
            raise ConfigError(
                f"--role-arn {self.role_arn!r}: an IAM role ARN, arn:aws:iam::ACCOUNT:role/NAME"
            )
        if self.replicas < 1:
            raise ConfigError(f"--replicas {self.replicas}: at least 1")
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ConfigError(
                f"--min-replicas {self.min_replicas} --max-replicas {self.max_replicas}: need "
                "1 <= min <= max (no scale to zero: a pod that does not run reports no metric to scale it "
                "up again)"
            )
        for target, per_pod in (
            ("--target-in-flight", self.target_in_flight),
            ("--target-queue", self.target_queue),
        ):
            if per_pod is not None and per_pod < 1:
                raise ConfigError(f"{target} {per_pod}: at least 1 (per pod)")
        if not 0 <= self.prestop_s <= 300:
            raise ConfigError(f"--prestop-seconds {self.prestop_s}: 0 to 300")
        if not self.prometheus_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"--prometheus-url {self.prometheus_url!r}: an http(s):// URL of the Prometheus server"
            )


def parse_secrets(items: Iterable[str]) -> tuple[dict[str, SecretRef], str | None]:
    """`--secret NAME=SECRET/KEY` (a Kubernetes Secret's key) and `--secret HF_TOKEN=ARN` (Secrets Manager,
    resolved by the container): the references and the token's ARN. The value is shown only when it is
    an ARN or has the SECRET/KEY shape, never when it may be the secret itself."""
    refs: dict[str, SecretRef] = {}
    token_arn: str | None = None
    for item in items:
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not _ENV_NAME.fullmatch(name):
            raise ConfigError("--secret: expected NAME=SECRET/KEY or HF_TOKEN=arn:aws:secretsmanager:...")
        if name in refs or (name == TOKEN_VAR and token_arn):
            raise ConfigError(f"--secret {name}: given twice")
        if value.startswith("arn:"):
            if name != TOKEN_VAR:
                raise ConfigError(
                    f"--secret {name}=ARN: only {TOKEN_VAR} is read from Secrets Manager by the container "
                    f"({ARN_VAR}); put {name} in a Kubernetes Secret and pass --secret {name}=SECRET/KEY",
                    (name,),
                )
            check_arn(value, f"--secret {TOKEN_VAR}")
            token_arn = value
            continue
        secret, slash, key = value.partition("/")
        if (
            not slash
            or not _SUBDOMAIN.fullmatch(secret)
            or len(secret) > 253
            or not _SECRET_KEY.fullmatch(key)
        ):
            raise ConfigError(
                f"--secret {name}: the value must name a Kubernetes Secret and its key, SECRET/KEY (e.g. "
                f"hf-token/token), or for {TOKEN_VAR} a Secrets Manager ARN; not the secret itself",
                (name,),
            )
        refs[name] = SecretRef(secret, key)
    return refs, token_arn
