"""The device, the model source and where compiled artifacts live: the first decisions of a plan (pure).

plan/build.py calls these before the engine is rendered: the device (`auto`: Neuron when the host has
devices), the model and where it comes from (a refusal names every variable that could set it), and
the artifact directory the compiled graphs are fetched into and published from (keyed by the cache
key, plan/cachekey.py).
"""

from __future__ import annotations

from dataclasses import replace

from neuronserve.config.settings import Setting, Settings
from neuronserve.errors import ConfigError
from neuronserve.plan.facts import HostFacts
from neuronserve.plan.resolution import Resolution
from neuronserve.types import ArtifactSpec, Device, ModelSpec


def choose_device(settings: Settings, facts: HostFacts) -> Device:
    """`--device` / NEURONSERVE_DEVICE; `auto` is Neuron on a host with devices, or when an instance type
    is declared (NEURONSERVE_INSTANCE_TYPE, `plan --instance-type`): every instance type the plan knows
    is a Neuron one, and planning it for the CPU skipped every Neuron check without a word. Only an
    explicit `cpu` plans for the CPU then (the instance type dropped with a warning: cpu_warnings)."""
    value = str(settings.device.value)
    if value == "auto":
        return "neuron" if facts.neuron_devices > 0 or settings.fit.instance_type else "cpu"
    return "neuron" if value == "neuron" else "cpu"


def cpu_warnings(settings: Settings, res: Resolution) -> None:
    """Every Neuron setting a CPU plan drops, each said once."""
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
        ("NEURONSERVE_INSTANCE_TYPE", bool(settings.fit.instance_type)),
    ):
        if present:
            res.warn(f"{name} is a Neuron setting: dropped for the CPU engine")


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


def artifacts(settings: Settings, work_dir: str, key: str) -> ArtifactSpec:
    """Where the compiled artifacts of cache key `key` live: keyed under NEURONSERVE_CACHE_URI, an
    explicit NEURON_COMPILED_ARTIFACTS location, or a local directory the plan owns; a required cache
    hit needs a remote cache."""
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
    """The artifact spec by source: NEURONSERVE_CACHE_URI and an explicit location are refused together."""
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
