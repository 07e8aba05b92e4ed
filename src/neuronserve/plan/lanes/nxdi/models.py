"""The model a Neuron launch can load: config.json `architectures[0]` against NxD Inference's model registry.

vllm-neuron resolves the class as `MODEL_TYPES[model][task]` from NxD Inference's utils/constants.py
(vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:641-666; 0.4.1 :948-975), and the
registry changes by release: NxD Inference 0.7.14366 (SDK 2.27.0) has no `pixtral`, so the plugin raises
"Model LlavaForConditionalGeneration is not supported" (:657-666); 2.28.0 adds `pixtral`, `qwen2_vl` and
`qwen3_vl`; the 0.7.15063 of SDK 2.27.1 images is not public. So the plan never claims what it cannot
know: on the image it checks the installed registry (HostFacts.nxdi_models, read by host/nxdi.py from
the package's files), elsewhere the lane's (PluginRules.model_types, read from its NxD Inference
release) and says so in a warning and in `plan --json` "stack" "nxd_inference" (`Registry.as_json`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.lanes.nxdi import derive
from neuronserve.plan.lanes.nxdi.profiles import PIXTRAL, V0_2, PluginRules, plugin_at_least
from neuronserve.plan.resolution import Resolution

CAUSAL_LM = "causal-lm"
NXDI = "neuronx-distributed-inference"


@dataclass(frozen=True)
class Registry:
    """The NxD Inference model registry a plan is checked against: `version`, `source` ("installed":
    read from this host's package; "assumed": the lane's release, nothing installed or readable here),
    and `models` (model type -> the tasks it builds)."""

    version: str
    source: str
    models: dict[str, tuple[str, ...]]

    def has(self, key: tuple[str, str]) -> bool:
        return key[1] in self.models.get(key[0], ())

    def as_json(self) -> dict[str, Any]:
        """`plan --json` "stack" "nxd_inference"."""
        return {"version": self.version, "source": self.source, "model_types": sorted(self.models)}

    def named(self) -> str:
        how = "installed here" if self.source == "installed" else "assumed: none read on this host"
        return f"NxD Inference {self.version} ({how})"


def registry(facts: HostFacts, rules: PluginRules = V0_2) -> Registry:
    """The installed registry when host/nxdi.py read one, else the lane's NxD Inference release's."""
    if facts.nxdi_models is not None:
        return Registry(facts.versions.get(NXDI) or "(version unknown)", "installed", dict(facts.nxdi_models))
    return Registry(rules.nxdi, "assumed", {key: (CAUSAL_LM,) for key in rules.model_types})


def warn_assumed(reg: Registry, facts: HostFacts, res: Resolution) -> None:
    """Off the image: say which registry the architecture was checked against."""
    if reg.source != "assumed":
        return
    installed = facts.versions.get(NXDI)
    why = (
        f"the installed NxD Inference {installed}'s registry could not be read (utils/constants.py)"
        if installed
        else "NxD Inference is not installed here"
    )
    res.warn(
        f"{why}: the model is checked against NxD Inference {reg.version}'s MODEL_TYPES "
        f"({', '.join(sorted(reg.models))}); on the image the installed registry is read instead"
    )


def loadable(rules: PluginRules, reg: Registry) -> list[str]:
    """The lane's architectures whose model type the registry builds (what a refusal lists)."""
    out = []
    for arch in rules.architectures:
        key = derive.plugin_model_key(arch, rules)
        if key is not None and reg.has(key):
            out.append(arch)
    return out


def check_architecture(
    facts: ModelFacts | None,
    model: str,
    res: Resolution,
    plugin_version: str | None = None,
    rules: PluginRules = V0_2,
    *,
    reg: Registry | None = None,
) -> None:
    """The class the plugin resolves from config.json `architectures[0]` must exist in NxD Inference.

    vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:619-638 reads architectures[0] (not
    model_type) and the head counts; :646-666 maps the name (derive.plugin_model_key) into
    NxD Inference MODEL_TYPES (0.7.14366 utils/constants.py:41-51), which only has causal-lm classes. So a
    LlamaForSequenceClassification (model_type llama) fails, and GptOssForCausalLM looks up "gptoss".
    0.2.2+lts builds Pixtral from `LlavaForConditionalGeneration` (worker/neuronx_distributed_model_loader.py
    :657-658, :679-680; limits in multimodal.py) when the registry has `pixtral`; before 0.2.2 it is
    refused (0.2.0 loader.py:672-674 raised NotImplementedError for it); another class mapping to
    "pixtral" would build a text-only NeuronCausalLM (:683-684): refused. `rules`: the lane's plugin
    (profiles.py: 0.4.1 also loads GPT-OSS, Qwen2-VL and Qwen3-VL); `reg`: the registry (`registry`),
    the lane's assumed one when not given."""
    reg = reg or registry(HostFacts(), rules)
    supported = ", ".join(loadable(rules, reg))
    config = facts.config if facts else None
    if not config:
        res.warn(
            f"architecture of {model} not checked before staging (no local config.json); supported "
            f"architectures: {supported}"
        )
        return
    archs = config.get("architectures") or []
    arch = str(archs[0]) if archs else ""
    key = derive.plugin_model_key(arch, rules) if arch else None
    pixtral = arch == PIXTRAL and plugin_at_least(plugin_version, (0, 2, 2))
    if not pixtral and (arch in derive.PLUGIN_REFUSED_ARCHITECTURES or (key and key[0] == "pixtral")):
        raise ConfigError(
            f"{model}: {arch} (Pixtral/LLaVA) does not run on vllm-neuron {plugin_version or '0.2.x'} "
            f"(0.2.2+lts runs Pixtral from a {PIXTRAL} checkpoint); choose a supported architecture "
            f"({supported})",
            ("SM_VLLM_MODEL",),
        )
    if key is not None and key[1] == CAUSAL_LM and key[0] in _known(rules) and not reg.has(key):
        raise ConfigError(
            f"{model}: {arch} is NxD Inference model type {key[0]!r}, which {reg.named()} does not have "
            f'(its MODEL_TYPES: {", ".join(sorted(reg.models))}): the plugin raises "Model {arch} is not '
            f'supported" at load (worker/neuronx_distributed_model_loader.py:657-666); use a supported '
            f"architecture ({supported}), or an image whose NxD Inference has {key[0]!r}",
            ("SM_VLLM_MODEL",),
        )
    if key is None or not reg.has(key):
        looked = f" (the plugin looks up {key[0]!r}/{key[1]!r} in NxD Inference)" if key else ""
        label = " GPT-OSS" if "gpt" in arch.lower() and "oss" in arch.lower() else ""
        raise ConfigError(
            f"{model}: architectures[0] {arch or '(none)'}{label} cannot be loaded by {rules.family}"
            f"{looked}: use a model whose config.json architectures[0] is one of {supported}",
            ("SM_VLLM_MODEL",),
        )
    if not derive.heads_known(config, arch, rules):
        res.warn(
            f"{model}: config.json has no num_key_value_heads / head_dim (or hidden_size and "
            "num_attention_heads); the plugin reads them before compiling and raises without them"
        )


def _known(rules: PluginRules) -> set[str]:
    """Model types some release of the lane's plugin resolves (so a missing one is the registry's)."""
    keys = {derive.plugin_model_key(arch, rules) for arch in rules.architectures}
    return {key[0] for key in keys if key is not None}
