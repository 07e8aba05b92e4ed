"""Multi-LoRA as vllm-neuron 0.2.2+lts runs it: the adapters are named once (SM_VLLM_ENABLE_LORA=true and
SM_VLLM_LORA_MODULES="name=s3://... other=/dir", vLLM's own `--lora-modules` syntax, or its JSON form
{"name": ..., "path": ...}), staged like the model, and the plan writes the plugin's adapter list itself.

How 0.2.2+lts builds LoRA (worker/neuronx_distributed_model_runner.py:155-192, `_get_nxdi_lora_config`):
it pops `target_modules` and `lora_ckpt_json` from `additional_config["override_neuron_config"]`
(:174-177, read with `.get(..., None)` and popped from at once: without an override the engine fails
with AttributeError, so the plan always renders one), takes max_loras / max_lora_rank /
max_cpu_loras from vLLM's LoRA config (:178, :183-187) and turns on `dynamic_multi_lora` when
VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 or max_cpu_loras > 0 (:179-180). vLLM 0.11.0's LoRAConfig sets
max_cpu_loras to max_loras when unset and refuses it below max_loras (config/lora.py
`_validate_lora_config`; max_loras >= 1), so dynamic multi-LoRA is always on under vLLM 0.11.0.
NxD Inference's LoraServingConfig (modules/lora_serving/config.py, the API 0.2.2 calls) then reads the
JSON file: `lora-ckpt-dir` (must be a directory; each path is joined to it), `lora-ckpt-paths` (on
device) and, with dynamic multi-LoRA, `content["lora-ckpt-paths-cpu"]` without a default (a file
without it fails with KeyError), and it refuses more adapters than max_cpu_loras in the union of both
lists (ValueError at load), while more device adapters than max_loras silently raise its own max_loras
above vLLM's. Requests select an adapter by the name vLLM registered from `--lora-modules`, which the
runner maps to the compiled adapter's index by that same name (:975-976): the names of both lists are
the names of `--lora-modules`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from neuronserve.config.settings import Settings
from neuronserve.errors import ConfigError
from neuronserve.plan.assets.locate import Staged, assets_dir, locate
from neuronserve.plan.facts import HostFacts
from neuronserve.plan.lanes.nxdi import overrides
from neuronserve.plan.lanes.nxdi.profiles import plugin_at_least
from neuronserve.plan.resolution import Resolution, count
from neuronserve.types import Device, Integration, RequestSupport

MODULES_VAR = "SM_VLLM_LORA_MODULES"
CKPT_KEY = "lora_ckpt_json"
# An adapter's name is also a directory under <work>/assets/lora and a request's `model` value.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# The max LoRA ranks any lane's vLLM accepts (vLLM 0.13.0 config/lora.py:25 MaxLoRARanks; 0.11.0's lacks 1,
# config/lora.py:104-109): any other --max-lora-rank fails the engine's config check on every device. A
# Neuron lane checks its own vLLM's list (plan/lanes/nxdi/overrides.py check_lora_rank).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
DEFAULT_RANK = 16  # vLLM 0.11.0 / 0.13.0 LoRAConfig.max_lora_rank


@dataclass(frozen=True)
class Adapter:
    name: str
    source: str  # as given
    local: str  # what --lora-modules and the adapter list name


def modules(settings: Settings) -> list[tuple[str, str, str]]:
    """(name, source, origin) of each adapter SM_VLLM_LORA_MODULES names, in the order given.

    The value is vLLM's `--lora-modules` list: `name=path` tokens separated by blanks, or JSON objects
    {"name", "path"} (one, or a JSON array of them / of `name=path` strings)."""
    s = settings.engine.get("lora-modules")
    if s is None or s.value is False:
        return []
    var = s.origin
    value = s.value
    if value is True or value == []:
        raise ConfigError(f"{var} is empty: name the adapters as `name=s3://bucket/a/ other=/dir`", (var,))
    tokens = value if isinstance(value, list) else _split(str(value))
    out: list[tuple[str, str, str]] = []
    for tok in tokens:
        name, path = _module(tok, var)
        if not NAME.fullmatch(name):
            raise ConfigError(
                f"{var}: adapter name {name!r} must be letters, digits, '.', '_' or '-' (it is a directory "
                "name and what requests select it by)",
                (var,),
            )
        if any(name == n for n, _, _ in out):
            raise ConfigError(f"{var}: adapter {name} is named twice: give each adapter one name", (var,))
        out.append((name, path, var))
    return out


def _split(text: str) -> list[str]:
    text = text.strip()
    return [text] if text.startswith("{") else text.split()


def _module(tok: str, var: str, as_given: bool = False) -> tuple[str, str]:
    """One `name=path` or JSON module; `as_given`: passed to vLLM unchanged, so vLLM's own
    base_model_name may stay (the plan renders SM_VLLM_LORA_MODULES as name=path, which would drop it)."""
    tok = tok.strip()
    if tok.startswith("{"):
        try:
            doc = json.loads(tok)
        except ValueError:
            doc = None
        if (
            not isinstance(doc, dict)
            or not isinstance(doc.get("name"), str)
            or not isinstance(doc.get("path"), str)
        ):
            raise ConfigError(
                f"{var}: {tok} is not a JSON object with string name and path (several objects: a JSON "
                'array, e.g. [{"name": "a", "path": "s3://b/a/"}])',
                (var,),
            )
        extra = sorted(set(doc) - {"name", "path", *(["base_model_name"] if as_given else [])})
        if extra:
            raise ConfigError(f"{var}: {tok}: only name and path are read, not {', '.join(extra)}", (var,))
        return doc["name"].strip(), doc["path"].strip()
    name, eq, path = tok.partition("=")
    if not eq or not name.strip() or not path.strip() or "=" in path:
        raise ConfigError(
            f"{var}: {tok!r} is not name=path (e.g. `support=s3://bucket/adapters/support/`)", (var,)
        )
    return name.strip(), path.strip()


def tail_modules(extra: tuple[str, ...]) -> list[tuple[str, str]]:
    """(name, path) of `--lora-modules` among the arguments after `--` (passed to vLLM as given)."""
    out: list[str] = []
    taking = False
    for tok in extra:
        if tok.startswith("--"):
            taking = tok == "--lora-modules"
            if tok.startswith("--lora-modules="):
                out.append(tok.split("=", 1)[1])
            continue
        if taking:
            out.append(tok)
    return [_module(tok, "-- --lora-modules", as_given=True) for tok in out]


def lora_assets(
    settings: Settings, facts: HostFacts, device: Device, res: Resolution, st: Staged
) -> list[Adapter]:
    """The adapters: each staged to `<work>/assets/lora/<name>` (a local directory is used in place; on
    CPU a hub id is left to vLLM, which downloads adapters itself), `--lora-modules` rendered with the
    local paths, and on Neuron the adapter list written into `plan.files` and named by the override.

    Adapters named only after `--` (`-- --lora-modules`, with a user's own SM_NEURON_LORA_CKPT_JSON)
    are served as given: not staged, but their names are what requests select. Both ways at once are
    refused: vLLM keeps the last `--lora-modules`, which would drop the staged adapters."""
    named = modules(settings)
    tail = tail_modules(settings.extra_args)
    lora = settings.get("enable-lora") is True
    if lora:
        _check_rank(settings)
        if device == "neuron":
            st.graph["lora"] = lora_graph(settings, len(named))
    if not named:
        if lora and device == "neuron" and not tail and "lora_ckpt_json" in res.override:
            res.warn(
                f"{res.origin('lora_ckpt_json')}: no adapter is named for vLLM, so no request can select "
                "one (and on Neuron a request without an adapter fails the engine step): name them in "
                "SM_VLLM_LORA_MODULES"
            )
        return [Adapter(name, path, path) for name, path in tail] if lora else []
    var = named[0][2]
    if tail:
        raise ConfigError(
            f"{var} and `-- --lora-modules` both name adapters (vLLM keeps only the last list): keep "
            f"{var}, which is staged",
            (var, "--lora-modules"),
        )
    lora_var = res.origins.get("enable-lora")
    if not lora:
        turn_on = f"{lora_var}=true" if lora_var else "SM_VLLM_ENABLE_LORA=true (or OPTION_ENABLE_LORA=true)"
        raise ConfigError(
            f"{var} names LoRA adapters but LoRA is off: set {turn_on}, or unset {var}",
            (var, lora_var or "SM_VLLM_ENABLE_LORA"),
        )
    root = f"{assets_dir(settings.work_dir)}/lora"
    adapters: list[Adapter] = []
    for name, source, origin in named:
        asset = locate("lora", source, f"{root}/{name}", origin, facts, name=name, hub=device == "neuron")
        if asset is not None:
            st.assets.append(asset)
        adapters.append(Adapter(name, source, asset.local if asset is not None else source))
    st.skip.add("lora-modules")
    st.flags += ["--lora-modules", *(f"{a.name}={a.local}" for a in adapters)]
    if device == "neuron":
        _neuron_list(settings, adapters, var, res, st)
    return adapters


def lora_graph(settings: Settings, named: int) -> dict[str, int]:
    """The LoRA shapes NxD Inference compiles, for the cache key (the engine's graph records only that
    LoRA is on): the runner passes vLLM's max_loras, max_lora_rank and max_cpu_loras to
    LoraServingConfig (vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_runner.py:178-187;
    0.4.1 :486-501). max_loras and max_lora_rank shape every LoRA weight tensor (NxD Inference
    modules/lora_serving/lora_layer.py:33, lora_module.py:28); max_cpu_loras shapes the host-memory
    adapter tensors dynamic multi-LoRA (always on: max_cpu_loras > 0) shards into the artifact
    directory (lora_checkpoint.py:283, models/application_base.py:256-260). The plugin loads that
    directory unchecked (loader :198-199, 214-226), so each belongs in the key. Unset, vLLM's values:
    max_loras 1 (the plan passes --max-loras <n> for n > 1 adapters named, _neuron_list), rank 16,
    max_cpu_loras = max_loras (vLLM 0.11.0 config/lora.py:33-44, 124-125). Adapters' own ranks raise
    NxD Inference's max_lora_rank at load (modules/lora_serving/config.py:64-69): keyed through the
    adapters' identity."""
    loras = count(settings, "max-loras", 1) or max(named, 1)
    rank = count(settings, "max-lora-rank", 1) or DEFAULT_RANK
    return {
        "max_loras": loras,
        "max_lora_rank": rank,
        "max_cpu_loras": count(settings, "max-cpu-loras", 1) or loras,
    }


def _check_rank(settings: Settings) -> None:
    rank = count(settings, "max-lora-rank")
    if rank is not None and rank not in LORA_RANKS:
        var = settings.origin("max-lora-rank", "SM_VLLM_MAX_LORA_RANK")
        raise ConfigError(
            f"{var}={rank}: vLLM accepts a max LoRA rank of {', '.join(map(str, LORA_RANKS))}: "
            "set the smallest one at least your adapters' rank `r`",
            (var,),
        )


def _neuron_list(settings: Settings, adapters: list[Adapter], var: str, res: Resolution, st: Staged) -> None:
    """The plugin's adapter list (module docstring), and how many adapters the device holds.

    - A user's own lora_ckpt_json with SM_VLLM_LORA_MODULES is refused (overrides.check_lora_modules):
      the plan writes the list from the staged paths, and two lists could name different adapters.
    - max_loras (vLLM's adapters per batch, NxD Inference's adapters on device): unset and more than one
      adapter, the plan passes `--max-loras <count>` and says so; at vLLM's default 1, max_cpu_loras
      would also be 1 and NxD Inference would refuse the list at load (more adapters than max_cpu_loras).
    - More adapters than a given max_loras: with max_cpu_loras covering all of them, the first
      max_loras are listed on device and all in host memory (dynamic multi-LoRA swaps them in);
      otherwise refused naming both variables, since NxD Inference either raises its max_loras above
      vLLM's or fails at load.
    - max_cpu_loras below max_loras is refused as vLLM 0.11.0 refuses it, before a download.
    """
    overrides.check_lora_modules(var, res)
    n = len(adapters)
    loras_var = settings.origin("max-loras", "SM_VLLM_MAX_LORAS")
    cpu_var = settings.origin("max-cpu-loras", "SM_VLLM_MAX_CPU_LORAS")
    given, max_cpu = count(settings, "max-loras", 1), count(settings, "max-cpu-loras", 1)
    max_loras = n if given is None else given
    if max_cpu is not None and max_cpu < max_loras:
        shown = (
            f"{loras_var}={max_loras}" if given is not None else f"max_loras={n} (the adapters {var} names)"
        )
        raise ConfigError(
            f"{cpu_var}={max_cpu} is below {shown}: vLLM refuses max_cpu_loras < max_loras; set {cpu_var} "
            f"to at least {max_loras}",
            (cpu_var, loras_var),
        )
    if given is None and n > 1:
        st.skip.add("max-loras")
        st.flags += ["--max-loras", str(n)]
        res.warn(f"max_loras set to {n}, the adapters {var} names: set {loras_var} to choose it")
    if n > max_loras and (max_cpu is None or max_cpu < n):
        raise ConfigError(
            f"{var} names {n} adapters but {loras_var}={max_loras}: NxD Inference would hold all {n} on "
            f"device (raising max_loras above vLLM's) or refuse them at load: set {loras_var}={n}, or set "
            f"{cpu_var}={n} to keep {max_loras} on device and swap the others in from host memory",
            (var, loras_var),
        )
    path = f"{assets_dir(settings.work_dir)}/lora-ckpt.json"
    doc = {
        "lora-ckpt-dir": assets_dir(settings.work_dir),
        "lora-ckpt-paths": {a.name: a.local for a in adapters[:max_loras]},
        "lora-ckpt-paths-cpu": {a.name: a.local for a in adapters},
    }
    st.files[path] = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    st.override[CKPT_KEY] = path
    st.origins[CKPT_KEY] = var


def request_support(
    base: RequestSupport,
    adapters: list[Adapter],
    *,
    lora: bool,
    device: Device,
    integration: Integration,
    plugin_version: str | None,
) -> RequestSupport:
    """`base` (the capabilities computed elsewhere) with the served adapter names, and whether a
    request must name one.

    adapter_required: on Neuron with the plugin and LoRA on, every new request reaches
    `_prepare_adapter_id_in_new_request` (runner :971-978), which returns early only when vLLM has no
    LoRA config (:972-973) and otherwise reads `request_data.lora_request.lora_name` (:975). The caller
    passes every scheduled new request, with no filter on LoRA: `_prepare_continuous_batching_inputs`
    (:817-820) calls `_process_new_request_for_continuous_batching`, which appends that adapter id
    (:865-866). vLLM's scheduler schedules a request without an adapter like any other (its LoRA
    limit skips only requests that have one, v1/core/sched/scheduler.py:942-948) and copies the
    request's `lora_request` into NewRequestData as is (`NewRequestData.from_request`,
    vllm/v1/core/sched/output.py), and its OpenAI server gives a request whose `model` is the base
    model's name `lora_request=None` (`OpenAIServing._maybe_get_adapters` returns None for a served
    model name that is no adapter).
    Read in the vLLM installed here (v1/core/sched/output.py:58-80, entrypoints/serve/engine/
    serving.py:194-213) and in the 0.11-era serving_engine.py, which behave the same. So with LoRA on,
    a request naming no adapter raises AttributeError on None inside the engine step, failing the
    batch it was scheduled with: the front must refuse it before it reaches the engine. (The
    chunked-prefill path, :796-798, never calls it and appends no adapter ids.) On the CPU device vLLM
    serves the base model for such a request: adapters are listed, not required.
    """
    names = tuple(a.name for a in adapters)
    plugin = device == "neuron" and integration == Integration.PLUGIN
    required = lora and plugin and plugin_at_least(plugin_version, overrides.LORA_FROM)
    return replace(base, lora_adapters=names, adapter_required=required)
