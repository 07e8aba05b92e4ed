"""The compiled-artifact cache key: a stable hash of everything that changes the compiled Neuron graph.

The plugin loads whatever NEURON_COMPILED_ARTIFACTS holds without checking it matches the settings
(vllm-neuron 0.2.2+lts worker/neuronx_distributed_model_loader.py:198-199 returns the variable as the
artifacts path, ahead of the config-hash path of :200-212; :185-188 and :214-226 load it and ignore the
override, compiling into it only when the load fails, :189-194), so the key is our only guard: same inputs,
same key on any machine (canonical JSON, no paths that differ between hosts, no timestamps); any change to the
graph inputs or the compiler stack, a new key.

What the graph is, on the NxD Inference lanes: the configuration NxD Inference serialises for it, the
document the plugin itself hashes to name a compiled directory (loader :180-183). The plan predicts it
(plan/lanes/nxdi/compiled.py, the engine's graph "compiled" entry) and the key hashes that prediction, with
only what lies outside it beside it (`OUTSIDE_CONFIG`): the integration, the compiler flags, the hardware
target, and the draft's identity. tests/contract proves, on every configuration it runs, that the
prediction is NxD Inference's own serialisation and that configurations NxD Inference builds differently
never share a key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from neuronserve.counts import positive
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import instances
from neuronserve.types import ModelSpec

# The lane whose keys predate lanes: left out of the hashed document, so its keys stay what they were
# (a key of any other lane names its lane). Lane 2.27, the default lane (plan/lanes/registry.py).
DEFAULT_LANE = "2.27"

# Bump when the key's inputs change meaning. 2: the weights digest, kv as compiled, every
# --additional-config key, NEURON_CC_FLAGS and the draft's content (plan/lanes/nxdi/engine.py _graph).
# 3: the NeuronCore generation, compiler target and logical core size (neuron_target).
# 4: the NxD Inference lanes' graph is the predicted serialised configuration (graph "compiled"), which
# holds what the launch numbers did and also LoRA's max_loras / max_lora_rank / max_cpu_loras.
SCHEMA = 4
# Graph entries hashed beside the predicted configuration: what shapes the compiled artifacts without being
# part of NxD Inference's configuration document.
# - integration, framework: which loader builds it (the plugin, or vLLM's older in-tree support);
# - neuron_cc_flags: NEURON_CC_FLAGS reaches the compiler directly;
# - neuron_target: the NeuronCore generation and compiler target (the configuration holds only the LNC);
# - speculative_config, draft: the draft as named and its content (the configuration leaves its path out).
OUTSIDE_CONFIG = (
    "integration",
    "framework",
    "neuron_cc_flags",
    "neuron_target",
    "speculative_config",
    "draft",
)
# neuronx-cc --target per instance family (the compiler's own names; trn2u is a Trn2 UltraServer node).
TARGETS = {"inf2": "inf2", "trn1": "trn1", "trn1n": "trn1n", "trn2": "trn2", "trn2u": "trn2"}
GENERATIONS = {
    instances.INFERENTIA2.name: "NeuronCore-v2",
    instances.TRAINIUM.name: "NeuronCore-v2",
    instances.TRAINIUM2.name: "NeuronCore-v3",
}
# Trn3 is not in the instance table (plan/fit/instances.py) yet; when it is, its chip maps to NeuronCore-v4.


def neuron_target(instance_type: str | None, facts: HostFacts, lnc_text: str | None) -> dict[str, Any]:
    """The hardware a compiled graph belongs to: NeuronCore generation, compiler target and logical
    core size, from NEURONSERVE_INSTANCE_TYPE, else the detected devices.

    Why each part:
    - generation: NEFFs compiled for NeuronCore-v2 (inf2, trn1) are refused on NeuronCore-v3 (trn2),
      and the reverse needs NEURON_RT_ALLOW_LEGACY_NEFF (aws-neuron-sdk#1259).
    - target: are inf2 and trn1 NEFFs interchangeable? Both chips carry NeuronCore-v2 (the same per-core
      HBM and bandwidth, plan/fit/instances.py), and NKI groups them as one platform
      (NEURON_PLATFORM_TARGET_OVERRIDE accepts `trn1|inf2|gen2` as one value), but neuronx-cc takes
      them as distinct `--target` values ("generate code for an inf2 instance type": release notes
      2.4.0.21 added `inf2`, 2.5.0.28 `trn1n`), and the collectives a TP graph is compiled with follow
      each instance's chip topology. No Neuron document promises that one target's NEFF loads and runs
      right on the other, so they are keyed apart: at worst one extra compile, where sharing could load
      a graph built for other hardware. trn2u (an UltraServer node) uses trn2's target.
    - logical_nc_config: the compiler shards for the runtime's LNC (`--logical-nc-config`), and Neuron
      does not support running a graph at another LNC than it was compiled for.
    Detected devices alone tell NeuronCore-v2 from v3 (2 or 8 cores per device) but not inf2 from
    trn1: the target is then "inf2|trn1" (one key for both), which NEURONSERVE_INSTANCE_TYPE refines.
    """
    lnc = positive(lnc_text) if lnc_text else None
    if instance_type:
        name = instances.normalize(instance_type)
        known = instances.INSTANCES.get(name)
        family = name.split(".")[0]
        if known is not None:
            chip = known[0]
            return {
                "generation": GENERATIONS[chip.name],
                "target": TARGETS.get(family, family),
                "logical_nc_config": lnc or chip.default_lnc,
            }
        return {"generation": None, "target": TARGETS.get(family, family), "logical_nc_config": lnc}
    cores = facts.physical_cores
    if facts.neuron_devices > 0 and cores and cores % facts.neuron_devices == 0:
        per_device = cores // facts.neuron_devices
        if per_device == instances.TRAINIUM2.physical_cores:
            return {"generation": "NeuronCore-v3", "target": "trn2", "logical_nc_config": lnc or 2}
        if per_device == instances.INFERENTIA2.physical_cores:
            return {"generation": "NeuronCore-v2", "target": "inf2|trn1", "logical_nc_config": lnc or 1}
    return {"generation": None, "target": None, "logical_nc_config": lnc}


KEY_VERSIONS = ("vllm", "vllm-neuron", "neuronx-distributed-inference", "neuronx-cc")


def key_inputs(
    model: ModelSpec,
    model_facts: ModelFacts | None,
    graph: Mapping[str, Any],
    versions: Mapping[str, str | None],
    assets: Sequence[Mapping[str, Any]] = (),
    *,
    lane: str = DEFAULT_LANE,
) -> dict[str, Any]:
    """The exact document that is hashed (printed by tools that explain a cache miss).

    `assets`: the identity of everything else the engine reads from disk (plan/assets/kinds.py `identity`:
    LoRA adapters and a quantized checkpoint; kind, name, source, revision and local content digests;
    the draft is in `graph`). Hashed only when there is one, so the key of a launch without them is
    the one it always had and artifacts already in a cache are still found.

    `lane`: the stack lane (plan/lanes/registry.py). The versions above name the installed stack, but a plan
    made on a laptop (NEURONSERVE_STACK, no plugin installed) has none, and the lanes compile different
    graphs from the same settings (2.32's plugin is a rewrite with its own compile cache), so the lane
    is hashed too. Like `assets`, only when it is not the default 2.27: 2.27's keys are the ones they
    always were (no SCHEMA bump, cached artifacts still found), and no other lane can share them,
    since every other lane's document has a "lane" entry 2.27's lacks."""
    doc = {
        "schema": SCHEMA,
        # Model identity: where it comes from and its revision; for local dirs the config.json digest,
        # because /opt/ml/model is the same path for every model, and the sampled weights digest
        # (host.facts.weights_digest), because a fine-tune keeps config.json and the artifacts embed the
        # weights with save_sharded_checkpoint. Not hashed: log level, ports, served model name and any
        # other setting that does not reach the compiled graph (graph holds only those that do).
        "model": {
            "source": model.source,
            "uri": model.uri,
            "revision": model.revision,
            "config_sha256": model_facts.config_sha256 if model_facts else None,
            "weights": model_facts.weights_digest if model_facts else None,
        },
        "graph": keyed_graph(graph),
        "versions": {name: versions.get(name) for name in KEY_VERSIONS},
    }
    if assets:
        doc["assets"] = [dict(a) for a in assets]
    if lane != DEFAULT_LANE:
        doc["lane"] = lane
    return doc


def keyed_graph(graph: Mapping[str, Any]) -> dict[str, Any]:
    """The graph part of the key: the predicted configuration and what lies outside it, where the lane
    predicts one; the whole graph description otherwise (lane 2.32's engine, the in-tree integration)."""
    predicted = graph.get("compiled")
    if predicted is None:
        return {k: v for k, v in graph.items() if k != "compiled"}
    return {"compiled": predicted, **{k: graph.get(k) for k in OUTSIDE_CONFIG}}


def cache_key(
    model: ModelSpec,
    model_facts: ModelFacts | None,
    graph: Mapping[str, Any],
    versions: Mapping[str, str | None],
    assets: Sequence[Mapping[str, Any]] = (),
    *,
    lane: str = DEFAULT_LANE,
) -> str:
    inputs = key_inputs(model, model_facts, graph, versions, assets, lane=lane)
    doc = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()[:32]
