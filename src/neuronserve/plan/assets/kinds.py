"""Assets: everything the engine reads from disk, each named by the user and read at a local path the
plan decides (pure), so staging can fetch it like the model and argv / override name only local paths.

Kinds besides the model: LoRA adapters (plan/assets/lora.py), an EAGLE draft (the speculative config's
`model`), an NxD Inference quantized checkpoint (override key `quantized_checkpoints_path`) and a chat
template file (`--chat-template`). Each source may be an s3:// prefix (or object, for a file), a local
path used in place, a `.tar.gz` (local or s3://) or, where the engine would otherwise download it
itself, a hub id. Local targets sit under `<work_dir>/assets/<kind>[/<name>]`, next to `<work_dir>/model`.

Why the engine must never get a hub id or an s3:// URI on Neuron: vllm-neuron 0.2.2+lts loads a model
path that does not exist on disk with `AutoModelForCausalLM.from_pretrained(id)` and `save_pretrained`
into `./local-models/<id>` (worker/neuronx_distributed_model_loader.py:228-232, reached from :391-393),
a full second copy of the weights; its README's known issue 2 says models with `tie_word_embeddings`
(Qwen3-8B) fail there with "Cannot copy out of meta tensor". The draft is read with
`load_pretrained_config` and `draft_model_path` (:293-301), and NxD Inference reads adapters from local
paths only (its LoraServingConfig refuses a path where `os.path.exists` fails: modules/lora_serving/config.py
`_check_valid_path`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from neuronserve.config.settings import Settings
from neuronserve.errors import ConfigError
from neuronserve.plan.assets.locate import ARCHIVES, Staged, assets_dir, locate
from neuronserve.plan.assets.lora import Adapter, lora_assets, modules
from neuronserve.plan.facts import HostFacts
from neuronserve.plan.lanes.nxdi import compiled
from neuronserve.plan.resolution import Resolution
from neuronserve.types import AssetFetch, AssetSpec, Device, ModelSpec

QUANTIZED_KEY = "quantized_checkpoints_path"
# vLLM reads a --chat-template holding any of these as the template text, anything else as a path.
TEMPLATE_TEXT = "{}\n"
# A quantized checkpoint named with one of these suffixes is one file (staged as such), else a directory.
CHECKPOINT_FILES = (".pt", ".pth", ".bin", ".safetensors")
# The fetch each ModelSpec source maps to (the SageMaker directory is a local directory).
MODEL_FETCH: dict[str, AssetFetch] = {
    "sagemaker": "local",
    "local": "local",
    "s3": "s3",
    "archive": "archive",
    "hub": "hub",
}


def stage_hub_model(model: ModelSpec, device: Device, work_dir: str) -> ModelSpec:
    """On Neuron a hub model is staged to `<work_dir>/model` (with its revision) and the engine gets
    that directory, never the id (module docstring: loader.py:228-232, :391-393). On the CPU device
    vLLM resolves a hub id itself, as it always did."""
    if device != "neuron" or model.source != "hub":
        return model
    return replace(model, local_path=f"{work_dir.rstrip('/')}/model")


def model_asset(model: ModelSpec) -> AssetSpec | None:
    """The model as the first asset; None for a hub id left to the engine (CPU: nothing to stage)."""
    if model.local_path is None:
        return None
    return AssetSpec(
        "model",
        model.uri,
        model.local_path,
        MODEL_FETCH[model.source],
        origin=model.origin,
        revision=model.revision,
    )


def draft_asset(settings: Settings, facts: HostFacts, device: Device, res: Resolution, st: Staged) -> None:
    """An EAGLE (or other) draft named by the speculative config's `model`: staged to
    `<work>/assets/draft` unless it is a local directory (used in place), and `--speculative-config`
    rendered with the local path. A hub id stays on CPU (vLLM downloads it) and is staged on Neuron
    (loader.py:293-301 reads it as a path)."""
    cfg, origin = res.speculation.config, res.origins.get("speculative-config", "SM_VLLM_SPECULATIVE_CONFIG")
    if cfg is None or not isinstance(cfg.get("model"), str) or not cfg["model"]:
        return
    source = cfg["model"]
    staged = f"{assets_dir(settings.work_dir)}/draft"
    asset = locate("draft", source, staged, origin, facts, hub=device == "neuron")
    if asset is None:
        return
    st.assets.append(asset)
    if asset.fetch == "local":
        return
    st.skip.add("speculative-config")
    st.flags += ["--speculative-config", json.dumps({**cfg, "model": asset.local}, sort_keys=True)]


def quantized_asset(
    settings: Settings, facts: HostFacts, device: Device, res: Resolution, st: Staged
) -> None:
    """NxD Inference's quantized checkpoint (override `quantized_checkpoints_path`, e.g.
    SM_NEURON_QUANTIZED_CHECKPOINTS_PATH): an s3:// or .tar.gz source is staged to
    `<work>/assets/quantized_checkpoint` and the override names that path. vllm-neuron 0.2.2+lts pops
    the key into NxD Inference's quantization config (loader.py:888-899), and on a compile it writes a
    fresh quantization of the model there (`save_quantized_state_dict`, loader.py:234-239): the local
    path is in the work dir, so it is writable. A local path that does not exist yet is left as given
    (NxD Inference creates it when it quantizes); there is nothing to stage."""
    value = res.override.get(QUANTIZED_KEY)
    if device != "neuron" or not isinstance(value, str) or not value.strip():
        return
    origin = res.origin(QUANTIZED_KEY)
    is_file = value.endswith(CHECKPOINT_FILES)
    staged = f"{assets_dir(settings.work_dir)}/quantized_checkpoint"
    found = facts.paths.get(value)
    remote = value.startswith("s3://") or value.endswith(ARCHIVES)
    if not remote and (found is None or found.kind == "missing"):
        return
    asset = locate("quantized_checkpoint", value, staged, origin, facts, is_file=is_file, hub=False)
    if asset is None:
        return
    st.assets.append(asset)
    if asset.local != value:
        st.override[QUANTIZED_KEY] = asset.local
        st.origins[QUANTIZED_KEY] = origin


def template_asset(settings: Settings, facts: HostFacts, st: Staged) -> None:
    """A chat template given as a file (`SM_VLLM_CHAT_TEMPLATE`): an s3:// object is staged to
    `<work>/assets/chat_template/<name>`, a local file is used in place. vLLM's --chat-template also
    takes the template text itself, which it tells from a path by the same test as here: text holds
    `{`, `}` or a newline (vLLM 0.11.0 entrypoints/chat_utils.py `_load_chat_template`, JINJA_CHARS);
    such a value is passed through as given. Any other value is a path, and one that is not on this
    host is refused: vLLM would fail at start ("looks like a file path, but it failed to be
    opened"). An empty value would be a bare `--chat-template`, which vLLM's parser refuses."""
    setting = settings.engine.get("chat-template")
    if setting is None or setting.value is False or setting.origin.startswith("-- "):
        return
    if not isinstance(setting.value, str) or not setting.value.strip():  # `--chat-template` with no value
        raise ConfigError(
            f"{setting.origin} is empty: give the template text, an absolute path or an s3:// object",
            (setting.origin,),
        )
    value = setting.value.strip()
    if any(c in value for c in TEMPLATE_TEXT):
        return
    staged = f"{assets_dir(settings.work_dir)}/chat_template"
    asset = locate("chat_template", value, staged, setting.origin, facts, is_file=True, hub=False)
    if asset is None:  # a name on no path: vLLM fails at start when it cannot open it
        raise ConfigError(
            f"{setting.origin}={value}: no such file on this host (a chat template file is an s3:// URI "
            "or an absolute path; the template text itself is passed as given)",
            (setting.origin,),
        )
    st.assets.append(asset)
    if asset.local != value:
        st.skip.add("chat-template")
        st.flags += ["--chat-template", asset.local]


def keyed_graph(graph: dict[str, Any], st: Staged) -> dict[str, Any]:
    """The compiled-graph description the cache key hashes: the override keys the plan set to local
    asset paths are left out (the path depends on the work dir, the asset's identity is hashed apart),
    so the same adapters give the same key under any NEURONSERVE_WORK_DIR; what the assets change in
    the graph (`st.graph`: the LoRA shapes) is merged in, and the predicted configuration
    (plan/lanes/nxdi/compiled.py) gets the LoRA numbers staging renders for the adapters."""
    graph = {**graph, **st.graph}
    predicted = graph.get("compiled")
    if isinstance(predicted, dict):
        loras, cpu = _flag_count(st.flags, "--max-loras"), _flag_count(st.flags, "--max-cpu-loras")
        graph = {**graph, "compiled": compiled.with_lora(predicted, loras, cpu)}
    override = graph.get("override")
    if not st.override or not isinstance(override, dict):
        return graph
    return {**graph, "override": {k: v for k, v in override.items() if k not in st.override}}


def _flag_count(flags: list[str], name: str) -> int | None:
    return int(flags[flags.index(name) + 1]) if name in flags else None


def identity(assets: list[AssetSpec], facts: HostFacts) -> list[dict[str, Any]]:
    """What the cache key hashes for each asset besides the model (plan/cachekey.py): kind, name,
    source as given and revision; for a local one also what the host facts say of its content
    (config.json digest, sampled weights digest), since a path can hold new content. Never the local
    path (it differs by work dir, not by content). Left out: the model (hashed apart), the draft (the
    graph already holds the speculative config as given and a local draft's content, plan/lanes/nxdi/engine.py
    `_graph`, so keys of launches with a draft stay what they were) and the chat template (vLLM's
    renderer reads it; the compiled graph does not depend on it)."""
    out: list[dict[str, Any]] = []
    for a in assets:
        if a.kind in ("model", "draft", "chat_template"):
            continue
        local = facts.paths.get(a.source) if a.fetch == "local" else None
        out.append(
            {
                "kind": a.kind,
                "name": a.name,
                "source": a.source,
                "revision": a.revision,
                "config_sha256": local.config_sha256 if local else None,
                "weights": local.weights_digest if local else None,
            }
        )
    return out


def plan_assets(
    settings: Settings, facts: HostFacts, model: ModelSpec, device: Device, res: Resolution
) -> tuple[Staged, list[Adapter]]:
    """Every asset of a launch, the model first, and what naming their local paths changes (Staged)."""
    st = Staged()
    first = model_asset(model)
    if first is not None:
        st.assets.append(first)
    adapters = lora_assets(settings, facts, device, res, st)
    draft_asset(settings, facts, device, res, st)
    quantized_asset(settings, facts, device, res, st)
    template_asset(settings, facts, st)
    return st, adapters


def local_candidates(settings: Settings) -> list[str]:
    """Asset sources that may be local paths, for the host to gather facts on before planning
    (existence, kind, digests): adapters, the quantized checkpoint and the chat template. A malformed
    adapter list gives none here; the plan refuses it with its message."""
    try:
        out = [path for _, path, _ in modules(settings)]
    except ConfigError:
        out = []
    for value in (settings.override.get(QUANTIZED_KEY), settings.engine.get("chat-template")):
        text = value.value if value is not None else None
        if isinstance(text, str) and text.strip() and not text.startswith("s3://"):
            out.append(text.strip())
    return out
