"""build_plan: Settings + HostFacts -> LaunchPlan. Pure: no environment, no files, no network.

Everything later phases do (stage the model, fetch artifacts by key, start the engine, serve) is decided
here, so `neuronserve plan` shows exactly what `serve` would do and every refusal happens before any
download. The argv order is fixed (model, host/port, compiled-graph flags, user flags sorted by name,
extra arguments last, less those the plan decides itself: see _engine_tail) so identical configurations
give identical commands.
"""

from __future__ import annotations

import json
from dataclasses import replace

from neuronserve.config.settings import EXTRA_BOOL, EXTRA_VALUE, Setting, Settings, flag_tokens
from neuronserve.errors import ConfigError
from neuronserve.plan import assets, cachekey, fit, guards, lanes, lora, pluginrules, replicas, support
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.neuron import CONSUMED, neuron_engine
from neuronserve.plan.resolution import Resolution
from neuronserve.types import ArtifactSpec, Device, LaunchPlan, ModelSpec

ENGINE_HOST = "127.0.0.1"
# Settings that exist only for Neuron: the CPU plan drops them, each with a warning.
NEURON_ONLY_FLAGS = frozenset(
    {"tensor-parallel-size", "num-gpu-blocks-override", "device", "override-neuron-config"}
)
# Handled by the plan itself, never passed through as a generic flag.
PLAN_FLAGS = frozenset({"model", "host", "port", "revision", "served-model-name", replicas.DP_KEY})
LISTEN_IGNORED = (
    " ignored: the engine listens on 127.0.0.1:NEURONSERVE_ENGINE_PORT behind the front server, whose port "
    "is SAGEMAKER_BIND_TO_PORT"
)


def choose_device(settings: Settings, facts: HostFacts) -> Device:
    value = str(settings.device.value)
    if value == "auto":
        return "neuron" if facts.neuron_devices > 0 else "cpu"
    return "neuron" if value == "neuron" else "cpu"


def choose_model(settings: Settings, facts: HostFacts, work_dir: str, res: Resolution) -> ModelSpec:
    """Source order: `-- --model`, SM_VLLM_MODEL, non-empty /opt/ml/model, HF_MODEL_ID, OPTION_MODEL_ID."""
    first = [m for m in settings.models if m.origin == "-- --model" or m.origin.upper() == "SM_VLLM_MODEL"]
    candidates = list(first)  # SM_VLLM_MODEL in any case after the prefix (SM_VLLM_Model: config/settings)
    if facts.sagemaker_model_dir_nonempty:
        candidates.append(Setting(facts.sagemaker_model_dir, "SM_MODEL_DIR"))
    candidates += [m for m in settings.models if m not in first]
    if not candidates:
        raise ConfigError(
            "no model configured: set SM_VLLM_MODEL (hub id, local dir, s3:// prefix or "
            ".tar.gz), put the model in "
            f"{facts.sagemaker_model_dir} (SM_MODEL_DIR), or set HF_MODEL_ID",
            ("SM_VLLM_MODEL", "SM_MODEL_DIR", "HF_MODEL_ID", "OPTION_MODEL_ID"),
        )
    chosen = candidates[0]
    ignored = [f"{c.origin}={c.value}" for c in candidates[1:] if c.value != chosen.value]
    if ignored:
        res.warn(f"model from {chosen.origin}; also configured and ignored: {', '.join(ignored)}")
    uri = str(chosen.value)
    revision = settings.get("revision")
    staged = f"{work_dir.rstrip('/')}/model"
    local = facts.paths.get(uri)
    if chosen.origin == "SM_MODEL_DIR":
        spec = ModelSpec("sagemaker", uri, uri, None, chosen.origin)
    elif uri.endswith((".tar.gz", ".tgz")):
        if not uri.startswith("s3://") and (local is None or local.kind != "file"):
            raise ConfigError(f"{chosen.origin}={uri}: no such archive on this host", (chosen.origin,))
        spec = ModelSpec("archive", uri, staged, None, chosen.origin)
    elif uri.startswith("s3://"):
        spec = ModelSpec("s3", uri, staged, None, chosen.origin)
    elif local is not None and local.kind == "dir":
        spec = ModelSpec("local", uri, uri, None, chosen.origin)
    elif uri.startswith(("/", ".", "~")) or (local is not None and local.kind == "file"):
        raise ConfigError(f"{chosen.origin}={uri}: no such model directory on this host", (chosen.origin,))
    else:
        spec = ModelSpec("hub", uri, None, str(revision) if revision else None, chosen.origin)
    if revision and spec.source != "hub":
        res.warn(f"{settings.origin('revision', 'revision')} ignored: {uri} is not a hub model")
    return spec


def _artifacts(settings: Settings, work_dir: str, key: str) -> ArtifactSpec:
    spec = _artifact_location(settings, work_dir, key)
    if not settings.fit.require_cache_hit:
        return spec
    if spec.mode not in ("keyed", "explicit"):
        raise ConfigError(
            "NEURONSERVE_REQUIRE_CACHE_HIT=true needs a remote cache to hit: set NEURONSERVE_CACHE_URI "
            "(s3:// prefix of the keyed cache) or unset NEURONSERVE_REQUIRE_CACHE_HIT",
            ("NEURONSERVE_REQUIRE_CACHE_HIT", "NEURONSERVE_CACHE_URI"),
        )
    return replace(spec, require_hit=True)


def _artifact_location(settings: Settings, work_dir: str, key: str) -> ArtifactSpec:
    local_dir = f"{work_dir.rstrip('/')}/artifacts/{key}"
    given = settings.artifacts
    if given is not None and settings.cache_uri:
        raise ConfigError(
            f"{given.origin}={given.value} and NEURONSERVE_CACHE_URI={settings.cache_uri} both "
            "choose where compiled "
            f"artifacts live: keep NEURONSERVE_CACHE_URI (keyed, safe) or the explicit location, not both",
            (given.origin, "NEURONSERVE_CACHE_URI"),
        )
    if settings.cache_uri:
        if not settings.cache_uri.startswith("s3://"):
            raise ConfigError(
                f"NEURONSERVE_CACHE_URI={settings.cache_uri} must be an s3:// prefix",
                ("NEURONSERVE_CACHE_URI",),
            )
        remote = f"{settings.cache_uri.rstrip('/')}/{key}/"
        return ArtifactSpec("keyed", local_dir, remote, settings.cache_read_only)
    if given is not None:
        value = str(given.value)
        if value.startswith("s3://"):
            return ArtifactSpec("explicit", local_dir, value, settings.cache_read_only)
        return ArtifactSpec("local", value, None, settings.cache_read_only)
    return ArtifactSpec("local", local_dir, None, settings.cache_read_only, owned=True)


def _user_flags(settings: Settings, skip: frozenset[str], device: Device, res: Resolution) -> list[str]:
    """Every other configured engine flag, sorted by name (the AWS DLC's deterministic order)."""
    out: list[str] = []
    for key in sorted(settings.engine):
        s = settings.engine[key]
        if key in ("host", "port") and not s.origin.startswith("-- "):
            res.warn(s.origin + LISTEN_IGNORED)
            continue
        if key in skip or key in PLAN_FLAGS or s.origin.startswith("-- "):
            continue
        if device == "cpu" and key in NEURON_ONLY_FLAGS:
            res.warn(f"{s.origin} is a Neuron setting: dropped for the CPU engine")
            continue
        out += flag_tokens(key, s.value)
    return out


def _cpu_warnings(settings: Settings, res: Resolution) -> None:
    for name, s in sorted(settings.override.items()):
        res.warn(f"{s.origin} ({name}) is a Neuron setting: dropped for the CPU engine")
    for name, present in (
        (settings.artifacts.origin if settings.artifacts else "", settings.artifacts is not None),
        ("NEURONSERVE_CACHE_URI", bool(settings.cache_uri)),
        ("NEURONSERVE_REQUIRE_CACHE_HIT", settings.fit.require_cache_hit),
        ("VLLM_NEURON_FRAMEWORK", settings.framework is not None),
        ("NEURONSERVE_INTEGRATION", settings.integration is not None),
        ("NEURON_RT_VISIBLE_CORES", bool(settings.visible_cores)),
        ("NEURON_LOGICAL_NC_CONFIG", bool(settings.logical_nc_config)),
    ):
        if present:
            res.warn(f"{name} is a Neuron setting: dropped for the CPU engine")


def _engine_tail(extra: tuple[str, ...], rendered: list[str], res: Resolution) -> tuple[str, ...]:
    """The arguments after `--` less those the plan already put in argv, since vLLM's argparse keeps the
    last of a repeated flag and the tail comes last:
    - `--model`: the plan passes the model it chose (staged to a local directory for s3:// or an
      archive); `-- --model s3://...` made vLLM load the URI, `-- --model a --model b` loaded b while the
      plan said a. The other models are named in choose_model's warning.
    - `--host`/`--port`: the engine must listen where the front proxies to (and each replica on its own
      port): dropped with the warning SM_VLLM_HOST/SM_VLLM_PORT get.
    - a flag the plan reads from after `--` and renders itself (`rendered`, the Neuron engine flags such
      as `--max-num-batched-tokens` or `--tensor-parallel-size`, whose `max` vLLM cannot parse): passed
      once, as the plan resolved it.
    """
    names = {tok[2:].removeprefix("no-") for tok in rendered if tok.startswith("--")}
    bools = names & EXTRA_BOOL
    values = (names & EXTRA_VALUE) | {"model", "host", "port"}
    out: list[str] = []
    skip = False
    for tok in extra:
        if skip:
            skip = False
            continue
        name, eq, _ = tok[2:].partition("=") if tok.startswith("--") else ("", "", "")
        if name in values:
            skip = not eq
            if name in ("host", "port"):
                res.warn(f"-- --{name}" + LISTEN_IGNORED)
        elif name.removeprefix("no-") not in bools:
            out.append(tok)
    return tuple(out)


def _refuse_extra_override(extra: tuple[str, ...]) -> None:
    """The plan merges the Neuron override itself; a second one after `--` would silently replace it."""
    for tok in extra:
        for flag, var in (
            ("--additional-config", "SM_VLLM_ADDITIONAL_CONFIG"),
            ("--override-neuron-config", "SM_NEURON_OVERRIDE_CONFIG"),
        ):
            if tok == flag or tok.startswith(flag + "="):
                raise ConfigError(
                    f"{flag} after `--` would replace the plan's Neuron override: set {var} "
                    f"(or SM_NEURON_<KEY>) instead",
                    (flag, var),
                )


def _model_argv(settings: Settings, facts: HostFacts, model: ModelSpec) -> list[str]:
    """The engine command up to its listen address: the model it reads, its revision when the engine
    fetches it, and the name it serves under (a staged hub model keeps its id as its name)."""
    argv = [facts.python, "-m", facts.vllm_module, "--model", model.local_path or model.uri]
    if model.revision and model.local_path is None:
        argv += ["--revision", model.revision]
    served = settings.engine.get("served-model-name")
    if served is not None and not served.origin.startswith("-- "):
        argv += flag_tokens("served-model-name", served.value)
    elif model.source == "hub" and model.local_path and served is None:
        argv += ["--served-model-name", model.uri]
    return [*argv, "--host", ENGINE_HOST, "--port", str(settings.engine_port)]


def build_plan(settings: Settings, facts: HostFacts) -> LaunchPlan:
    """The whole launch decision, computed from its two inputs only."""
    res = Resolution.of(settings)
    lane = lanes.choose_lane(settings.stack, facts)
    lanes.check_instance(lane, settings.fit.instance_type, facts)  # before any download
    device = choose_device(settings, facts)
    work_dir = settings.work_dir
    model = assets.stage_hub_model(choose_model(settings, facts, work_dir, res), device, work_dir)
    guards.check_tool_calling(settings)
    model_facts: ModelFacts | None = facts.paths.get(model.uri) if model.local_path == model.uri else None
    staged, adapters = assets.plan_assets(settings, facts, model, device, res)
    argv = _model_argv(settings, facts, model)
    if device == "neuron":
        _refuse_extra_override(settings.extra_args)
        res.override.update(staged.override)  # local paths of assets named by override keys
        res.origins.update(staged.origins)
        engine = neuron_engine(settings, facts, model.uri, model_facts, res, lane=lane)
        instance, estimate = fit.check_fit(settings, facts, engine.graph, model_facts, res)
        memory = estimate.as_json() if estimate else None
        instance_doc = instance.as_json() if instance else None
        argv += engine.flags + staged.flags
        argv += _user_flags(settings, CONSUMED | staged.skip, device, res)
        identity = assets.identity(staged.assets, facts)
        graph = assets.keyed_graph(engine.graph, staged)
        key = cachekey.cache_key(model, model_facts, graph, facts.versions, identity, lane=lane.lane)
        artifacts = _artifacts(settings, work_dir, key)
        if engine.artifacts_subdir and artifacts.local_dir:
            artifacts = replace(artifacts, local_dir=f"{artifacts.local_dir}/{engine.artifacts_subdir}")
        elif artifacts.mode == "keyed" and "save_sharded_checkpoint" not in engine.override:
            res.warn(
                "cached artifacts without save_sharded_checkpoint re-shard from the model path on every "
                "load: set SM_NEURON_SAVE_SHARDED_CHECKPOINT=true to make them self-contained "
                "(larger upload, faster start)"
            )
        env = {**engine.env, **engine.artifacts_env(artifacts.local_dir or "")}
        override, integration, lane_support = engine.override, engine.integration, engine.support
        slices = replicas.neuron_slices(settings, facts, int(engine.graph["tp"]), res)
        rendered = engine.flags + staged.flags
    else:
        _cpu_warnings(settings, res)
        argv += staged.flags
        argv += _user_flags(settings, frozenset({"additional-config"}) | staged.skip, device, res)
        if settings.additional_config:
            argv += ["--additional-config", json.dumps(settings.additional_config, sort_keys=True)]
        key, artifacts, env, override, integration = None, ArtifactSpec(), {}, None, "cpu"
        lane_support = None
        memory, instance_doc = None, None
        slices = replicas.cpu_slices(settings, facts, res)
        rendered = staged.flags
    if model.revision and model.local_path:
        rendered = [*rendered, "--revision"]  # staged at that revision: the engine reads a directory
    argv += replicas.strip_dp_args(_engine_tail(settings.extra_args, rendered, res))
    specs = replicas.build(
        device,
        argv,
        env,
        slices,
        base_port=settings.engine_port,
        front_port=settings.serve.port,
        min_ready=settings.serve.min_ready_replicas,
    )
    return LaunchPlan(
        device=device,
        argv=specs[0].argv,
        env=specs[0].env,
        model=model,
        neuron_override=override,
        cache_key=key,
        warnings=tuple(res.warnings),
        engine_host=ENGINE_HOST,
        engine_port=settings.engine_port,
        artifacts=artifacts,
        serve=settings.serve,
        work_dir=work_dir,
        integration=integration,
        memory=memory,
        instance=instance_doc,
        replicas=specs,
        assets=tuple(staged.assets),
        files=staged.files,
        request_support=lora.request_support(
            lane_support or support.request_support(device, integration, override, pluginrules.of(lane.lane)),
            adapters,
            lora=settings.get("enable-lora") is True,
            device=device,
            integration=integration,
            plugin_version=facts.versions.get("vllm-neuron"),
        ),
        stack=lane.stack_json(),
    )
