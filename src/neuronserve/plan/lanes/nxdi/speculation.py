"""Speculative decoding as the lane's vLLM, plugin and NxD Inference run it: a method they do not run as
asked, a draft the config class cannot describe, and EAGLE with prefix caching.

- The method. The plugin turns on NxD Inference's EAGLE path only for method "eagle" (vllm-neuron 0.2.2+lts
  worker/neuronx_distributed_model_loader.py:791-794, 0.4.1 :1112-1118) and compiles every other draft as
  a plain fused draft model: "eagle3", "medusa", "mlp_speculator" or "mtp" would run, but not as asked
  (NxD Inference reads is_eagle3 only from the override, models/config.py:231 at v0.7.14366). A plain draft
  model ("draft_model", also what vLLM detects when no method is given and the draft's name says no EAGLE)
  is refused by vLLM itself before the plugin sees it ("Speculative decoding with draft model is not
  supported yet", vLLM 0.11.0 config/speculative.py:348-353, 0.13.0 :379-384), and for "ngram" vLLM hands the
  target model over as the draft (config/speculative.py:275-279), so 0.2.2+lts compiles the target as its
  own fused draft instead of prompt lookup (the contract tier builds it), and 0.4.1 fails to read a draft
  config from "ngram" (loader :355-372). So each lane runs "eagle" only
  (PluginRules.speculative_methods), and the method is resolved as vLLM resolves it (`method_of`).
- The draft's config class. 0.2.2+lts builds the draft's config with the target's config class (loader
  :291-295), and NxD Inference asserts that the config carries every attribute that class requires
  (InferenceConfig.validate_config, models/config.py:776-777): an EAGLE Llama draft on a Mixtral target
  fails "Config must define ['num_local_experts', 'num_experts_per_tok']". 0.4.1 builds it with the draft's
  own class when its architecture resolves (loader :355-409; PluginRules.draft_own_class), else the
  target's. The required attributes are read from the lane's source (fields.py REQUIRED).
- EAGLE with prefix caching. NxD Inference runs EAGLE with prefix caching through a context-encoding path of
  its own (models/model_base.py:1980 at v0.7.14366, :1973 at 2.28.0): planned, and said; EAGLE3 with prefix
  caching asserts ("We do not yet support integration of EAGLE3 and prefix caching", :1707 / :1700), so an
  override's is_eagle3 with prefix caching is refused.
"""

from __future__ import annotations

from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.facts import ModelFacts
from neuronserve.plan.lanes.nxdi import derive, multimodal
from neuronserve.plan.lanes.nxdi.fields import CONFIG_CLASS, REQUIRED
from neuronserve.plan.lanes.nxdi.profiles import PluginRules
from neuronserve.plan.resolution import Resolution

NGRAM = ("ngram", "[ngram]")
MTP = ("mtp", "deepseek_mtp", "mimo_mtp", "glm4_moe_mtp", "ernie_mtp", "qwen3_next_mtp", "longcat_flash_mtp")
# Where the plugin sets enable_eagle_speculation (for "eagle" only), by plugin.
EAGLE_ONLY_AT = {
    "vllm-neuron 0.2.2+lts": "worker/neuronx_distributed_model_loader.py:791-794",
    "vllm-neuron 0.4.1": "worker/neuronx_distributed_model_loader.py:1112-1118",
}
# Where vLLM refuses a plain draft model, by vLLM.
DRAFT_REFUSED_AT = {
    "vLLM 0.11.0": "config/speculative.py:348-353",
    "vLLM 0.13.0": "config/speculative.py:379-384",
}
# EAGLE's prefix-caching context encoding, and the EAGLE3 assert, by NxD Inference source.
PREFIX_AT = {
    "nxdi-0.7.14366": ("models/model_base.py:1980", "models/model_base.py:1707"),
    "nxdi-2.28.0": ("models/model_base.py:1973", "models/model_base.py:1700"),
}
# Attributes every Hugging Face config has (transformers PretrainedConfig.__init__ sets them).
HF_COMMON = frozenset({"pad_token_id", "bos_token_id", "eos_token_id"})


def method_of(cfg: dict[str, Any], draft: ModelFacts | None) -> tuple[str, bool]:
    """The method vLLM runs for a speculative config (vLLM 0.11.0 config/speculative.py:234-353), and
    whether it was detected rather than given: "ngram" by name; an MTP type; "eagle"/"eagle3" as given;
    otherwise, with a draft model, detected from its name ("eagle-" -> eagle, "eagle3" -> eagle3) or its
    config.json model_type (medusa, mlp_speculator, an MTP type), else "draft_model"."""
    given = cfg.get("method")
    model = cfg.get("model")
    if given in NGRAM or model in NGRAM:
        return "ngram", given is None
    if given in MTP:
        return "mtp", False
    if given in ("eagle", "eagle3") or not isinstance(model, str):
        return str(given or "draft_model"), given is None
    name = model.lower()
    model_type = str(((draft.config if draft else None) or {}).get("model_type", ""))
    if "eagle-" in name:
        found = "eagle"
    elif "eagle3" in name:
        found = "eagle3"
    elif model_type in ("medusa", "mlp_speculator"):
        found = model_type
    elif model_type in MTP:
        found = "mtp"
    else:
        found = "draft_model"
    return found, given is None or given != found


def check_method(draft: ModelFacts | None, res: Resolution, rules: PluginRules) -> None:
    """Refuse a speculative method the lane does not run as asked, naming the ones it runs."""
    cfg = res.speculation.config
    if not cfg:
        return
    method, detected = method_of(cfg, draft)
    if method in rules.speculative_methods:
        return
    origin = res.origins["speculative-config"]
    how = f'"method": "{method}"' if not detected else f'method "{method}" (what vLLM detects for this draft)'
    runs = ", ".join(f'"{m}"' for m in rules.speculative_methods)
    if method == "draft_model":
        why = (
            f'{rules.vllm} refuses a plain draft model itself ("Speculative decoding with draft model is not '
            f'supported yet", {DRAFT_REFUSED_AT.get(rules.vllm, "config/speculative.py")})'
        )
    else:
        extra = ""
        if method == "ngram" and rules.draft_own_class:
            extra = '; for ngram it then fails to read a draft config.json from "ngram" (loader :355-372)'
        elif method == "ngram":
            extra = (
                "; for ngram vLLM hands over the target itself as the draft (vLLM config/speculative.py:"
                "275-279), so the target is compiled as its own draft, with no prompt lookup"
            )
        why = (
            f'{rules.plugin} turns on NxD Inference\'s EAGLE path only for "eagle" '
            f"({EAGLE_ONLY_AT.get(rules.plugin, 'its loader')}) and compiles any other method as a plain "
            f"draft model{extra}"
        )
    raise ConfigError(
        f"{origin}: {how} is not run as asked on {rules.plugin}: {why}: the method it runs is {runs} (an "
        f'EAGLE draft): set "method": "eagle" with an EAGLE draft, or unset {origin}',
        (origin,),
    )


def _has(config: dict[str, Any], attribute: str) -> bool:
    node: Any = config
    for part in attribute.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def check_draft_class(
    model: ModelFacts | None, draft: ModelFacts | None, res: Resolution, rules: PluginRules
) -> None:
    """Refuse a draft whose config.json cannot be described by the config class the plugin builds it with
    (the target's, unless the lane's plugin resolves the draft's own: `draft_own_class`)."""
    cfg = res.speculation.config
    if not cfg or draft is None or not draft.config or model is None:
        return
    source = rules.nxdi_source
    target_key = derive.plugin_model_key(multimodal.architecture(model), rules)
    draft_arch = multimodal.architecture(draft)
    draft_key = derive.plugin_model_key(draft_arch, rules) if draft_arch else None
    if target_key is None or target_key[0] not in REQUIRED[source]:
        return
    draft_type = draft_key[0] if draft_key else None
    if rules.draft_own_class and draft_type in CONFIG_CLASS[source]:
        return  # built with its own class (0.4.1 loader :355-409)
    # The draft's config is loaded through its own Hugging Face class (by config.json model_type), whose
    # defaults give the attributes its family requires.
    family = str(draft.config.get("model_type") or draft_type or "")
    own = set(REQUIRED[source].get(family, "").split())
    missing = [
        a
        for a in REQUIRED[source][target_key[0]].split()
        if a not in HF_COMMON and a not in own and not _has(draft.config, a)
    ]
    if not missing:
        return
    origin = res.origins["speculative-config"]
    target_arch = multimodal.architecture(model)
    how = (
        "builds the draft's config with the target's config class (loader :291-295)"
        if not rules.draft_own_class
        else f"falls back to the target's config class for a draft architecture it does not build "
        f"({draft_arch or 'none named'}; loader :355-409)"
    )
    raise ConfigError(
        f"{origin}: the draft {cfg.get('model')} ({draft_arch or 'no architectures'}) cannot be described by "
        f"{target_arch}'s config class: {rules.plugin} {how}, and NxD Inference asserts that the config "
        f"defines {', '.join(missing)}, which the draft's config.json does not (InferenceConfig."
        f"validate_config, models/config.py): use a draft built for {target_arch}",
        (origin,),
    )


def check_prefix(res: Resolution, rules: PluginRules) -> None:
    """EAGLE with prefix caching: said (NxD Inference has a path for it), refused for EAGLE3."""
    cfg = res.speculation.config
    if not cfg or cfg.get("method") != "eagle" or res.kv.get("mode") != "prefix":
        return
    origin, p_var = res.origins["speculative-config"], res.origins["enable-prefix-caching"]
    path_at, eagle3_at = PREFIX_AT.get(rules.nxdi_source, ("models/model_base.py", "models/model_base.py"))
    if res.override.get("is_eagle3") is True:
        var = res.origin("is_eagle3")
        raise ConfigError(
            f'{var}=true with prefix caching ({p_var}): NxD Inference asserts "We do not yet support '
            f'integration of EAGLE3 and prefix caching" when it builds the model ({rules.nxdi_source} '
            f"{eagle3_at}): set {p_var}=false, or remove {var}",
            (var, p_var),
        )
    res.warn(
        f"{origin} with prefix caching: planned, as {rules.plugin}'s NxD Inference runs EAGLE with prefix "
        f"caching through its own context-encoding path ({rules.nxdi_source} {path_at}; its EAGLE3 "
        f"asserts against prefix caching, {eagle3_at})"
    )
