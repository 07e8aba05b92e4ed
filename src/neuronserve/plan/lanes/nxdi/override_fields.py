"""Override keys against the lane's own NeuronConfig fields: a key NxD Inference does not read is refused,
naming the closest field.

Every override_neuron_config key (SM_NEURON_<KEY>, SM_NEURON_OVERRIDE_CONFIG, SM_VLLM_OVERRIDE_NEURON_CONFIG,
SM_VLLM_ADDITIONAL_CONFIG's override_neuron_config) reaches NxD Inference's NeuronConfig as a keyword
argument (vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:873-880, 0.4.1 :1209-1240), and
NeuronConfig only logs the keys it does not read ("NeuronConfig init: Unexpected keyword arguments",
models/config.py:563 at v0.7.14366, :605 at 2.28.0) and compiles without them: a misspelt
SM_NEURON_SEQUENCE_PARALEL_ENABLED=true compiled without sequence parallelism, 15 minutes later.

The fields are read from the lane's NxD Inference source by scripts/neuron-config-fields (fields.py, a
generated module: the plan stays pure), per NeuronConfig class, and the class is the one the model's type
builds (an MoE model's MoENeuronConfig reads capacity_factor, a Llama's NeuronConfig does not). Besides,
the plugin pops its own keys before NxD Inference sees them (PluginRules.plugin_keys: the LoRA keys, the
multimodal nested objects, 0.4.1's draft_overrides); a nested text_neuron_config / vision_neuron_config
is checked key by key the same way (the plugin builds both with the model's NeuronConfig class, 0.2.2+lts
loader :428-437).
"""

from __future__ import annotations

import difflib
from functools import cache
from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.facts import ModelFacts
from neuronserve.plan.lanes.nxdi import derive, multimodal
from neuronserve.plan.lanes.nxdi.fields import CONFIG_CLASS, FIELDS
from neuronserve.plan.lanes.nxdi.profiles import PluginRules
from neuronserve.plan.resolution import Resolution

NESTED = ("text_neuron_config", "vision_neuron_config")
# Where NeuronConfig logs the keys it does not read, per reference folder.
UNEXPECTED_AT = {"nxdi-0.7.14366": "models/config.py:563", "nxdi-2.28.0": "models/config.py:605"}


@cache
def class_fields(source: str, name: str) -> frozenset[str]:
    """The keyword arguments NeuronConfig class `name` reads, its bases' included."""
    base, own = FIELDS[source][name]
    inherited = class_fields(source, base) if base else frozenset()
    return inherited | frozenset(own.split())


@cache
def all_fields(source: str) -> frozenset[str]:
    return frozenset().union(*(class_fields(source, name) for name in FIELDS[source]))


def model_fields(model: ModelFacts | None, rules: PluginRules) -> tuple[frozenset[str], str]:
    """The fields the model's NeuronConfig class reads, and the class's name; without a local config.json
    (or for a type the lane does not build), those of any NeuronConfig class of the lane."""
    source = rules.nxdi_source
    key = derive.plugin_model_key(multimodal.architecture(model), rules)
    name = CONFIG_CLASS[source].get(key[0]) if key else None
    if name is None:
        return all_fields(source), "NeuronConfig"
    return class_fields(source, name), name


def check_override_keys(model: ModelFacts | None, res: Resolution, rules: PluginRules) -> None:
    """Refuse an override key (or a nested multimodal object's key) no NeuronConfig field of the lane's NxD
    Inference reads and the plugin does not pop itself. Runs before any rule adds a key."""
    fields, cls = model_fields(model, rules)
    for key, value in res.override.items():
        var = res.origin(key)
        if key in NESTED and isinstance(value, dict):
            for inner in value:
                if inner not in fields:
                    _refuse(f"{key}.{inner}", inner, fields, cls=cls, var=var, rules=rules)
            continue
        if key not in fields and key not in rules.plugin_keys:
            _refuse(key, key, fields | frozenset(rules.plugin_keys), cls=cls, var=var, rules=rules)


def closest(key: str, names: frozenset[str]) -> str | None:
    found = difflib.get_close_matches(key, sorted(names), n=1, cutoff=0.6)
    return found[0] if found else None


def _refuse(shown: str, key: str, names: frozenset[str], *, cls: str, var: str, rules: PluginRules) -> Any:
    source = rules.nxdi_source
    near = closest(key, names)
    if near is None:
        fix = f"remove it (the fields are {cls}'s keyword arguments in NxD Inference's models/config.py)"
    elif var.startswith("SM_NEURON_") and var.upper() == "SM_NEURON_" + key.upper():
        fix = f"did you mean {near}? set SM_NEURON_{near.upper()} instead"
    else:
        fix = f"did you mean {near}?"
    raise ConfigError(
        f"{var} sets {shown}, which NxD Inference's {cls} does not read on {rules.plugin} (it logs "
        f'"Unexpected keyword arguments" and compiles without it: {source} {UNEXPECTED_AT.get(source, "")}): '
        f"{fix}",
        (var,),
    )
