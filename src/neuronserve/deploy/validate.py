"""One validation for every deploy path: SageMaker (`deploy.py`, `update.py`), ECS (`ecs/render.py`) and
EKS (`neuronserve deploy k8s`) run the launch plan the container will run, on the instance it will run on.

What the container would refuse at start (no model, TP above the cores,
`SM_VLLM_ENABLE_PREFIX_CACHING=yes`, a bad number) is refused here with the same message and exit 2,
before anything is created, so the three targets can never judge one environment differently. The plan is
built as the container builds it (`launchplan.read_settings`, then `plan.build.build_plan`), with the host
facts the container will have in place of this machine's: device neuron, the instance's NeuronCores
visible (logical cores at the environment's NEURON_LOGICAL_NC_CONFIG, the unit `tensor_parallel_size`
counts on Trn2: plan/fit/instances.py), the instance type for the HBM fit check, and `/opt/ml/model`
filled only where SageMaker fills it (`--model-data`). The installed versions stay this machine's: the
stack lane is the installed vllm-neuron's or NEURONSERVE_STACK's, as in `neuronserve plan`.

Instance names: `plan` takes `ml.inf2.xlarge` and `inf2.xlarge` alike, so every deploy path does, and
spells the name the way its API wants it: SageMaker's `InstanceType` has the `ml.` prefix, an EC2
instance type (ECS's `ecs.instance-type` attribute, the EKS node label `node.kubernetes.io/instance-type`)
has none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from neuronserve.config.origin import Setting
from neuronserve.config.settings import Settings
from neuronserve.config.table import VARS
from neuronserve.counts import positive
from neuronserve.deploy.placeholders import check_placeholders
from neuronserve.deploy.secrets import masked_text
from neuronserve.errors import ConfigError
from neuronserve.launchplan import read_settings
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import instances
from neuronserve.plan.replicas import requested
from neuronserve.types import LaunchPlan

Target = Literal["sagemaker", "ecs", "eks"]
SAGEMAKER: Target = "sagemaker"
ECS: Target = "ecs"
EKS: Target = "eks"

MODEL_DIR = "/opt/ml/model"
# Where the image works (docker/Dockerfile: `ENV NEURONSERVE_WORK_DIR=/var/lib/neuronserve`, its WORKDIR):
# the plan's work directory, and so the k8s work volume's mount, is the container's, never the table
# default a rendering machine would take (/tmp/neuronserve). An environment that sets it keeps its own.
WORK_DIR_VAR = "NEURONSERVE_WORK_DIR"
IMAGE_WORK_DIR = "/var/lib/neuronserve"
_UNCHECKED = "HBM fit not checked"  # plan/fit/check.py's warning when it had no config.json
# What SM_MODEL_DIR points at while planning: this machine's /opt/ml/model (and a serving.properties in
# it) is not the container's, so the plan must read neither.
_NO_MODEL_DIR = "/nonexistent/neuronserve-deploy/opt-ml-model"
_NO_MODEL_HINT: dict[Target, str] = {
    "sagemaker": "/opt/ml/model (pass --model-data s3://BUCKET/PREFIX/: SageMaker copies it there)",
    "ecs": "/opt/ml/model (this task mounts no model there)",
    "eks": "/opt/ml/model (these pods mount no model there)",
}
# Set by the target itself, never by the environment: on EKS the Neuron device plugin hands each pod its
# cores (NEURON_RT_VISIBLE_CORES), so a value in the ConfigMap would point the runtime at cores the pod
# does not own; the fit check is made here against --instance-type, while inside a pod that holds part
# of a node the declared type would disagree with the devices it sees (plan/fit/instances.py
# check_agreement).
_TARGET_OWNED: dict[Target, tuple[str, ...]] = {
    "sagemaker": (),
    "ecs": (),
    "eks": ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURONSERVE_INSTANCE_TYPE"),
}


@dataclass(frozen=True)
class Checked:
    """The plan the container will run, and what it was checked for."""

    plan: LaunchPlan
    warnings: tuple[str, ...]  # the plan's warnings, secret values masked
    instance: str  # the instance type in the target's spelling
    visible_cores: int  # NeuronCores the plan was given (logical on Trn2)
    logical_nc_config: int  # physical cores per logical core the plan assumed (1 off Trn2)


def instance_name(raw: str, target: Target) -> str:
    """`ml.inf2.xlarge` or `inf2.xlarge` in the target's spelling; a ConfigError naming the known types."""
    key = instances.normalize(raw)
    instances.refuse_unserved(raw, "--instance-type")
    if key not in instances.INSTANCES:
        known = ", ".join(instances.INSTANCES)
        raise ConfigError(
            f"--instance-type {raw}: not a Neuron instance type; use one of {known} (with or without `ml.`)",
            ("--instance-type",),
        )
    return f"ml.{key}" if target == SAGEMAKER else key


def logical_nc_config(env: Mapping[str, str]) -> int | None:
    """NEURON_LOGICAL_NC_CONFIG of the environment (None: the chip's default), read through its row."""
    raw = VARS["NEURON_LOGICAL_NC_CONFIG"].read(env)
    if not raw:
        return None
    lnc = positive(str(raw))
    if lnc is None:
        raise ConfigError(
            f"NEURON_LOGICAL_NC_CONFIG={raw!r} must be 1 or 2 (physical NeuronCores per logical core)",
            ("NEURON_LOGICAL_NC_CONFIG",),
        )
    return lnc


def plan_check(
    env: Mapping[str, str],
    instance_type: str,
    target: Target,
    *,
    model_mounted: bool = False,
    visible_cores: int | None = None,
    locations: Mapping[str, str | None] | None = None,
    model_config: str | None = None,
) -> Checked:
    """The container's plan for `env` on `instance_type` (every core visible unless `visible_cores`).

    `model_mounted`: /opt/ml/model will hold a model (SageMaker's `--model-data`). `locations`: S3
    locations given as flags (`--model-data`, `--async-output`), checked for placeholders with the
    environment's. `model_config`: the model's config.json (`--model-config PATH`), for a model the plan
    cannot read from here (S3, the hub): the HBM fit is checked with it. Raises the plan's ConfigError,
    with the fix it names and no secret value in it."""
    instance = instance_name(instance_type, target)
    config = read_model_config(model_config) if model_config else None
    check_placeholders({**env, **(locations or {})})
    owned = [name for name in _TARGET_OWNED[target] if VARS[name].read(env)]
    if owned:
        raise ConfigError(
            f"{', '.join(owned)}: set by {target.upper()} for each pod, not by the environment (the Neuron "
            "device plugin picks the pod's cores; the fit is checked against --instance-type): remove it",
            tuple(owned),
        )
    facts = instances.instance_facts(instance, logical_nc_config(env))
    cores = visible_cores or facts.cores
    environ = {**env, "NEURONSERVE_DEVICE": "neuron", "SM_MODEL_DIR": _NO_MODEL_DIR}
    environ.setdefault(WORK_DIR_VAR, IMAGE_WORK_DIR)  # the image's, not this machine's default
    if visible_cores:  # a pod's share of the node (k8s): what the device plugin will make visible
        environ["NEURON_RT_VISIBLE_CORES"] = f"0-{cores - 1}"
    environ.setdefault("NEURONSERVE_INSTANCE_TYPE", instances.normalize(instance))
    try:
        seen = (cores, f"the {cores} NeuronCores of {instance}")
        plan = _plan(environ, model_mounted, seen)
        if config is not None:
            plan = _fitted(environ, model_mounted, seen, plan, config)
    except ConfigError as err:
        message = str(err).replace(f"{_NO_MODEL_DIR} (SM_MODEL_DIR)", _NO_MODEL_HINT[target])
        message = message.replace(_NO_MODEL_DIR, MODEL_DIR)
        raise ConfigError(
            masked_text(f"the container would refuse this environment on {instance}: {message}", env),
            err.variables,
        ) from None
    warnings = tuple(masked_text(w.replace(_NO_MODEL_DIR, MODEL_DIR), env) for w in plan.warnings)
    return Checked(plan, warnings, instance, cores, facts.logical_nc_config)


def read_model_config(path: str) -> dict[str, Any]:
    """`--model-config PATH`: a config.json (or a directory holding one), as a JSON object."""
    file = Path(path) / "config.json" if Path(path).is_dir() else Path(path)
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except OSError as err:
        why = "no such file" if isinstance(err, FileNotFoundError) else err.strerror or str(err)
        raise ConfigError(f"--model-config {path}: {why}", ("--model-config",)) from None
    except ValueError as err:
        raise ConfigError(f"--model-config {path}: not JSON ({err})", ("--model-config",)) from None
    if not isinstance(doc, dict):
        raise ConfigError(f"--model-config {path}: a config.json is a JSON object", ("--model-config",))
    return doc


def _fitted(
    environ: Mapping[str, str],
    model_mounted: bool,
    cores: tuple[int, str],
    plan: LaunchPlan,
    config: dict[str, Any],
) -> LaunchPlan:
    """`plan` with the HBM fit checked on `config`, the model's config.json given at render: the same
    plan made once more with a stand-in local model that has that config (its refusal is the render's;
    an architecture the lane does not run is refused too). The plan returned is still `plan` (its argv
    names the real model), with that estimate and its warnings in place of "HBM fit not checked"."""
    from neuronserve.plan.build import build_plan

    settings, facts = _inputs(environ, model_mounted, cores)
    stand_in = "/neuronserve-deploy/--model-config"
    fitted = build_plan(
        replace(settings, models=(Setting(stand_in, "--model-config"),)),
        replace(facts, paths={**facts.paths, stand_in: ModelFacts("dir", config=config)}),
    )
    kept = [w for w in plan.warnings if not w.startswith(_UNCHECKED)]
    found = [w for w in fitted.warnings if w.startswith("HBM estimate")]
    return replace(plan, memory=fitted.memory, warnings=(*kept, *found))


def _inputs(
    environ: Mapping[str, str], model_mounted: bool, cores: tuple[int, str]
) -> tuple[Settings, HostFacts]:
    """The container's settings and host facts (see _plan)."""
    from neuronserve.host import facts as hostfacts

    settings = read_settings(environ, device="neuron")
    paths = {str(m.value): ModelFacts("dir") for m in settings.models if str(m.value).startswith("/")}
    facts = replace(
        hostfacts.gather(environ),
        neuron_devices=0,
        physical_cores=None,
        sagemaker_model_dir=MODEL_DIR if model_mounted else _NO_MODEL_DIR,
        sagemaker_model_dir_nonempty=model_mounted,
        paths=paths,
    )
    if facts.visible_cores is None and requested(settings)[0] is None:
        facts = replace(facts, visible_cores=cores[0], cores_source=cores[1])
    return settings, facts


def _plan(environ: Mapping[str, str], model_mounted: bool, cores: tuple[int, str]) -> LaunchPlan:
    """launchplan.resolve_plan with the container's host facts in place of this machine's: a model path
    in the environment is the container's (a directory the plan cannot read from here), /opt/ml/model
    is filled only by SageMaker, and no device of this machine counts. `cores`: the NeuronCores the
    container will see and where that number comes from; a data-parallel size of `auto` is resolved
    from them (the container counts its visible cores; here the declared instance says how many)."""
    from neuronserve.plan.build import build_plan

    return build_plan(*_inputs(environ, model_mounted, cores))


def tensor_parallel(plan: LaunchPlan) -> int:
    """The engine's `--tensor-parallel-size` (1 when the plan passes none)."""
    argv = list(plan.argv)
    if "--tensor-parallel-size" in argv:
        return int(argv[argv.index("--tensor-parallel-size") + 1])
    return 1


def cores_used(plan: LaunchPlan) -> int:
    """NeuronCores the plan's engines compute on, all replicas together: TP x DP (one replica is given
    every visible core, plan/replicas.py `build`, and runs on the first TP of them)."""
    return tensor_parallel(plan) * max(1, len(plan.replicas))


def max_num_seqs(plan: LaunchPlan) -> int | None:
    """The engine's `--max-num-seqs` (the compiled batch size on Neuron), when the plan passes it."""
    argv = list(plan.argv)
    if "--max-num-seqs" in argv:
        return positive(argv[argv.index("--max-num-seqs") + 1])
    return None
