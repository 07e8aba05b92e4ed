"""EKS manifests from the plan the container will run: `neuronserve deploy k8s`.

The environment is checked first by the one validation every deploy path runs (deploy/validate.py):
what the container would refuse at start is refused here (exit 2) and nothing is rendered. Then the
plan sizes the pod: its TP x DP NeuronCores (deploy/k8s/resources.py) become the pod's Neuron request,
and the plan is made again with exactly the cores the pod will see, as the container will make it;
the two must use the same cores. The serving pods and the compile Job share one ConfigMap of settings;
each sets its own NEURONSERVE_REQUIRE_CACHE_HIT: the Job compiles (false), autoscaled pods never do
(true), other pods follow the environment.

The objects come in three groups, so the compile can finish before the server starts:
`base` (ServiceAccount, ConfigMap), `compile` (the Job, with base) and the server (Deployment, Service,
PodDisruptionBudget, the autoscaler, with base). yamlout.py writes them as one stream or a directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neuronserve.config.table import VARS
from neuronserve.deploy.driver import note
from neuronserve.deploy.k8s import objects, pod, probes, scaling
from neuronserve.deploy.k8s.options import K8sOptions
from neuronserve.deploy.k8s.resources import PodSize, size_pod
from neuronserve.deploy.secrets import refuse_clear_secrets
from neuronserve.deploy.validate import EKS, Checked, cores_used, instance_name, max_num_seqs, plan_check
from neuronserve.errors import ConfigError
from neuronserve.host.secrets import ARN_VAR, TOKEN_VAR, check_arn

Manifest = tuple[str, dict[str, Any]]  # (file name in the output directory, the object)
_HOW = (
    "--secret {name}=SECRET/KEY (a Kubernetes Secret) or, for HF_TOKEN, "
    "--secret HF_TOKEN=arn:aws:secretsmanager:..."
)


@dataclass(frozen=True)
class Rendered:
    base: list[Manifest]
    compile: list[Manifest]
    server: list[Manifest]
    notes: list[str] = field(default_factory=list)
    checked: Checked | None = None  # the serving pod's plan
    size: PodSize | None = None

    def documents(self) -> list[dict[str, Any]]:
        """Every object in the order to apply them: base, the Job, the server."""
        return [doc for _, doc in (*self.base, *self.compile, *self.server)]


def _settings(opts: K8sOptions, env: Mapping[str, str]) -> dict[str, str]:
    """The ConfigMap's settings: the environment (no secret value, refused), the token's ARN, the device;
    the cache-hit rule is each container's own."""
    refuse_clear_secrets(env, opts.secret_refs, "the ConfigMap (readable by anyone who may read it)", _HOW)
    data = {k: v for k, v in env.items() if k != pod.REQUIRE_HIT}
    arn: str | None = VARS[ARN_VAR].read(data)
    if opts.token_arn:
        if arn and arn != opts.token_arn:
            raise ConfigError(f"--secret {TOKEN_VAR}=ARN and {ARN_VAR} in the environment differ: keep one")
        data[ARN_VAR] = arn = opts.token_arn
    if arn:
        check_arn(arn)
        if TOKEN_VAR in opts.secret_refs:
            raise ConfigError(
                f"{TOKEN_VAR} from a Kubernetes Secret and {ARN_VAR}: keep one", (TOKEN_VAR, ARN_VAR)
            )
    data["NEURONSERVE_DEVICE"] = "neuron"
    return data


def _check(env: Mapping[str, str], opts: K8sOptions, require_hit: bool, cores: int | None) -> Checked:
    planned = {**env, pod.REQUIRE_HIT: "true" if require_hit else "false"}
    try:
        return plan_check(
            planned, opts.instance_type, EKS, visible_cores=cores, model_config=opts.model_config
        )
    except ConfigError as err:
        if opts.autoscaler != "none" and pod.REQUIRE_HIT in err.variables:
            raise ConfigError(
                f"--autoscaler {opts.autoscaler}: autoscaled pods start with {pod.REQUIRE_HIT}=true (a new "
                "pod never compiles), which needs a remote compile cache: set "
                "NEURONSERVE_CACHE_URI=s3://<your-bucket>/<prefix>/ (the compile Job fills it) or use "
                "--autoscaler none",
                ("NEURONSERVE_CACHE_URI", "--autoscaler"),
            ) from None
        raise


def _refuse_compiling_autoscaled(opts: K8sOptions, env: Mapping[str, str]) -> None:
    """An autoscaled pod never compiles, so an environment that asks it to (the rule set false) is a
    contradiction to resolve, never a value to override without a word."""
    asked = env.get(pod.REQUIRE_HIT, "").strip()
    if opts.autoscaler != "none" and asked and not VARS[pod.REQUIRE_HIT].read(env):
        raise ConfigError(
            f"--autoscaler {opts.autoscaler} with {pod.REQUIRE_HIT}={asked!r}: autoscaled pods start with "
            f"{pod.REQUIRE_HIT}=true (a new pod never compiles; the compile Job fills the cache): remove "
            f"{pod.REQUIRE_HIT} from the environment, or use --autoscaler none",
            (pod.REQUIRE_HIT, "--autoscaler"),
        )


def render(opts: K8sOptions, env: Mapping[str, str]) -> Rendered:
    """Every object for `opts` and `env`, or the ConfigError of the first problem (nothing rendered)."""
    opts.check()
    instance = instance_name(opts.instance_type, EKS)
    data = _settings(opts, env)
    autoscaled = opts.autoscaler != "none"
    serve_hit = autoscaled or bool(VARS[pod.REQUIRE_HIT].read(env))
    _refuse_compiling_autoscaled(opts, env)
    whole = _check(data, opts, serve_hit, None)
    cores = cores_used(whole.plan)
    size = size_pod(instance, cores, whole.logical_nc_config, opts.neuron_resource)
    checked = _check(data, opts, serve_hit, size.visible_cores)
    if cores_used(checked.plan) != cores:
        raise ConfigError(
            f"with the {size.visible_cores} NeuronCores of {size.units} {size.resource} the plan uses "
            f"{cores_used(checked.plan)} cores, not {cores}: set SM_VLLM_TENSOR_PARALLEL_SIZE and "
            "NEURONSERVE_DATA_PARALLEL, or ask for neuroncore units",
            ("SM_VLLM_TENSOR_PARALLEL_SIZE", "NEURONSERVE_DATA_PARALLEL"),
        )
    plan = checked.plan
    config_map = objects.config_map(opts, data)
    cm_name = config_map["metadata"]["name"]
    base: list[Manifest] = [
        ("serviceaccount.yaml", objects.service_account(opts)),
        ("configmap.yaml", config_map),
    ]
    notes = [f"plan warning: {w}" for w in checked.warnings]

    if opts.compile_job and plan.artifacts.mode == "keyed":
        compile_docs = [_compile_job(opts, instance, data, size, cm_name)]
    else:
        compile_docs = []
        if plan.artifacts.mode != "keyed":
            notes.append(
                "no NEURONSERVE_CACHE_URI: no compile Job, and every pod compiles at its first start; set "
                "it to a prefix in a bucket you own to compile once and start later pods from the cache"
            )
    served, budget, grace = _server(opts, instance, checked, size, cm_name)
    notes += _notes(opts, checked, size, budget, grace)
    return Rendered(base, compile_docs, served, notes, checked, size)


def _compile_job(
    opts: K8sOptions, instance: str, data: Mapping[str, str], size: PodSize, config_map: str
) -> Manifest:
    """The Job running `neuronserve compile` on the serving pod's cores, with its own plan (no cache-hit
    rule); given three compile budgets (its retries) before Kubernetes stops it."""
    plan = _check(data, opts, False, size.visible_cores).plan
    runner = pod.container(
        "compile",
        opts,
        "compile",
        config_map=config_map,
        size=size,
        work_dir=plan.work_dir,
        require_hit=False,
    )
    job_pod = pod.pod_spec(opts, instance, size, [runner], restart="Never")
    return ("job.yaml", objects.job(opts, job_pod, 3 * probes.compile_budget_s(plan)))


def _server(
    opts: K8sOptions, instance: str, checked: Checked, size: PodSize, config_map: str
) -> tuple[list[Manifest], int, int]:
    """The Deployment (the stage initContainer, then the server with its probes), its Service, PDB and
    autoscaler; and the startup budget and grace period they were given."""
    plan, autoscaled = checked.plan, opts.autoscaler != "none"
    hit = plan.artifacts.require_hit
    port = plan.serve.port
    server = pod.container(
        "neuronserve",
        opts,
        "serve",
        config_map=config_map,
        size=size,
        work_dir=plan.work_dir,
        require_hit=hit,
    )
    server["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    server.update(probes.probes(plan, opts.prestop_s))
    stage = pod.container(
        "stage",
        opts,
        "stage",
        config_map=config_map,
        size=size,
        work_dir=plan.work_dir,
        require_hit=hit,
        shm=False,
    )
    grace = probes.grace_period_s(plan, opts.prestop_s)
    server_pod = pod.pod_spec(opts, instance, size, [server], init=[stage], grace_s=grace)
    budget = probes.startup_budget_s(plan)
    served: list[Manifest] = [
        ("deployment.yaml", objects.deployment(opts, server_pod, budget, port, autoscaled)),
        ("service.yaml", objects.service(opts, port)),
        ("poddisruptionbudget.yaml", objects.disruption_budget(opts)),
    ]
    batch = (max_num_seqs(plan) or 1) * max(1, len(plan.replicas))
    if plan.serve.max_concurrency:
        batch = min(batch, plan.serve.max_concurrency)
    if opts.autoscaler == "keda":
        served.append(("scaledobject.yaml", scaling.scaled_object(opts, batch)))
    elif opts.autoscaler == "hpa":
        served.append(("horizontalpodautoscaler.yaml", scaling.horizontal_autoscaler(opts, batch)))
    return served, budget, grace


def _notes(opts: K8sOptions, checked: Checked, size: PodSize, budget: int, grace: int) -> list[str]:
    plan = checked.plan
    engines = max(1, len(plan.replicas))
    start = "cache hit" if plan.artifacts.require_hit else "compile"
    out = [
        f"pod: {size.units} {size.resource} ({cores_used(plan)} NeuronCores: {engines} engine(s) of TP "
        f"{cores_used(plan) // engines}), {size.cpu_millis}m CPU, {size.memory_mib}Mi memory on "
        f"{checked.instance}; startup budget {budget} s ({start}), termination grace {grace} s",
        note(EKS),
    ]
    if checked.instance.startswith("trn2"):
        out.append(
            f"Trn2: the nodes' Logical NeuronCore configuration must be {checked.logical_nc_config} (the "
            "plan's NEURON_LOGICAL_NC_CONFIG): the device plugin counts neuroncore units at the node's LNC"
        )
    if not opts.role_arn:
        out.append(
            "no --role-arn: the pods' S3 and Secrets Manager calls use the node's instance role (IRSA "
            "needs a role)"
        )
    return out
