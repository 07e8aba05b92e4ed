"""build_plan: Settings + HostFacts -> LaunchPlan. Pure: no environment, no files, no network.

Everything later phases do (stage the model, fetch artifacts by key, start the engine, serve) is decided
here, so `neuronserve plan` shows exactly what `serve` would do and every refusal happens before any
download. This module only orders the decisions: the lane (plan/lanes/registry.py), the device, model and
artifact location (model.py), the assets (assets/), the engine the lane renders (`lane.engine`), the
fit check (fit/), the cache key (cachekey.py), the command line (command.py) and the replicas
(replicas.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from neuronserve.config.settings import Settings
from neuronserve.plan import cachekey, command, flagcheck, model, replicas
from neuronserve.plan.assets import kinds, lora
from neuronserve.plan.assets.locate import Staged
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import cores
from neuronserve.plan.fit.check import check_fit
from neuronserve.plan.fit.estimate import Workload
from neuronserve.plan.fit.estimate_plan import plan_estimate
from neuronserve.plan.flagcheck import OptionTable
from neuronserve.plan.lanes.lane import CONSUMED, Lane
from neuronserve.plan.lanes.registry import check_instance, choose_lane
from neuronserve.plan.resolution import Resolution
from neuronserve.types import ArtifactSpec, Integration, LaunchPlan, ModelSpec, RequestSupport


@dataclass(frozen=True)
class DevicePlan:
    """What the device's half of the plan decides: the engine flags after the model argv, the engine
    environment, the rendered override and integration, what requests may ask, the compiled artifacts
    and their key, the HBM estimate, the replica slices, and the flags rendered (for engine_tail)."""

    flags: list[str]
    slices: list[list[int]]
    rendered: list[str]
    integration: Integration = Integration.CPU
    support: RequestSupport = field(default_factory=RequestSupport)
    env: dict[str, str] = field(default_factory=dict)
    override: dict[str, Any] | None = None
    key: str | None = None
    artifacts: ArtifactSpec = field(default_factory=ArtifactSpec)
    memory: dict[str, Any] | None = None
    instance: dict[str, Any] | None = None
    speed: dict[str, Any] | None = None  # the speed estimate (plan/fit/estimate.py as_json)
    stack: dict[str, Any] = field(default_factory=dict)  # beside the lane's pins (NeuronEngine.stack)


def build_plan(settings: Settings, facts: HostFacts, *, workload: Workload | None = None) -> LaunchPlan:
    """The whole launch decision, computed from its two inputs only (and the workload the speed estimate
    assumes: `plan --input-len/--output-len/--concurrency`, estimate.Workload's defaults when None)."""
    res = Resolution.of(settings)
    lane = choose_lane(settings.stack, facts)
    check_instance(lane, settings.fit.instance_type, facts)  # before any download
    device = model.choose_device(settings, facts)
    table = flagcheck.table_for(device, lane, facts, res)
    command.check_flags(settings, device, table)  # first: a misspelled variable is named as set
    work_dir = settings.work_dir
    spec = kinds.stage_hub_model(model.choose_model(settings, facts, work_dir, res), device, work_dir)
    command.check_tool_calling(settings, res)
    staged, adapters = kinds.plan_assets(settings, facts, spec, device, res)
    argv = command.model_argv(settings, facts, spec)
    if device == "neuron":
        half = _neuron(settings, facts, spec, lane, staged=staged, res=res, table=table, workload=workload)
    else:
        half = _cpu(settings, facts, staged=staged, res=res, table=table)
    argv += half.flags
    rendered = half.rendered
    if spec.revision and spec.local_path:
        rendered = [*rendered, "--revision"]  # staged at that revision: the engine reads a directory
    tail = replicas.strip_dp_args(command.engine_tail(settings.extra_args, rendered, res))
    flagcheck.check_tail(tail, table)  # what vLLM gets after `--`, values included
    argv += tail
    specs = replicas.build(
        device,
        argv,
        half.env,
        half.slices,
        base_port=settings.engine_port,
        front_port=settings.serve.port,
        min_ready=settings.serve.min_ready_replicas,
    )
    return LaunchPlan(
        device=device,
        argv=specs[0].argv,
        env=specs[0].env,
        model=spec,
        neuron_override=half.override,
        cache_key=half.key,
        warnings=tuple(res.warnings),
        engine_host=command.ENGINE_HOST,
        engine_port=settings.engine_port,
        artifacts=half.artifacts,
        serve=settings.serve,
        work_dir=work_dir,
        integration=half.integration,
        memory=half.memory,
        instance=half.instance,
        estimate=half.speed,
        replicas=specs,
        assets=tuple(staged.assets),
        files=staged.files,
        request_support=lora.request_support(
            half.support,
            adapters,
            lora=settings.get("enable-lora") is True,
            device=device,
            integration=half.integration,
            plugin_version=facts.versions.get("vllm-neuron"),
        ),
        stack={**lane.stack_json(), **half.stack},
    )


def _neuron(
    settings: Settings,
    facts: HostFacts,
    spec: ModelSpec,
    lane: Lane,
    *,
    staged: Staged,
    res: Resolution,
    table: OptionTable | None,
    workload: Workload | None = None,
) -> DevicePlan:
    """The Neuron half: the lane renders the engine, then the fit check, the user's other flags, the
    cache key of what it compiles and where those artifacts live, and the replicas' cores."""
    declared = cores.declared_instance(settings)  # an unknown instance type: refused before the rest
    res.override.update(staged.override)  # local paths of assets named by override keys
    res.origins.update(staged.origins)
    model_facts: ModelFacts | None = facts.paths.get(spec.uri) if spec.local_path == spec.uri else None
    engine = lane.engine(settings, facts, spec.uri, model_facts, res, lane=lane)
    cores.check_cores(settings, declared, int(engine.graph["tp"]))  # a count, before the HBM estimate
    instance, estimate, place = check_fit(settings, facts, engine.graph, model_facts, res)
    flags = engine.flags + staged.flags
    flags += command.user_flags(settings, CONSUMED | staged.skip, "neuron", res, table)
    identity = kinds.identity(staged.assets, facts)
    graph = kinds.keyed_graph(engine.graph, staged)
    key = cachekey.cache_key(spec, model_facts, graph, facts.versions, identity, lane=lane.lane)
    artifacts = model.artifacts(settings, settings.work_dir, key)
    if engine.artifacts_subdir and artifacts.local_dir:
        artifacts = replace(artifacts, local_dir=f"{artifacts.local_dir}/{engine.artifacts_subdir}")
    elif (
        artifacts.mode == "keyed"
        and engine.cache_env is None
        and "save_sharded_checkpoint" not in engine.override
    ):
        res.warn(
            "cached artifacts without save_sharded_checkpoint re-shard from the model path on every "
            "load: set SM_NEURON_SAVE_SHARDED_CHECKPOINT=true to make them self-contained "
            "(larger upload, faster start)"
        )
    slices = replicas.neuron_slices(settings, facts, int(engine.graph["tp"]), res)
    speed = None
    if place is not None:
        speed = plan_estimate(
            place.models, place.instance, engine.graph, dp=len(slices), res=res, workload=workload
        )
    return DevicePlan(
        flags=flags,
        slices=slices,
        rendered=engine.flags + staged.flags,
        integration=engine.integration,
        support=engine.support,
        env={**engine.env, **engine.artifacts_env(artifacts.local_dir or "")},
        override=engine.override,
        key=key,
        artifacts=artifacts,
        memory=estimate.as_json() if estimate else None,
        instance=instance.as_json() if instance else None,
        speed=speed.as_json() if speed else None,
        stack=engine.stack,
    )


def _cpu(
    settings: Settings, facts: HostFacts, *, staged: Staged, res: Resolution, table: OptionTable | None
) -> DevicePlan:
    """The CPU half: vLLM's CPU engine honours every request field and compiles nothing; the Neuron
    settings are dropped, each said."""
    model.cpu_warnings(settings, res)
    flags = staged.flags + command.user_flags(
        settings, frozenset({"additional-config"}) | staged.skip, "cpu", res, table
    )
    if settings.additional_config:
        flags += ["--additional-config", json.dumps(settings.additional_config, sort_keys=True)]
    return DevicePlan(flags=flags, slices=replicas.cpu_slices(settings, facts, res), rendered=staged.flags)
