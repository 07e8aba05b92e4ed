"""The compiled-artifact cache key: a stable hash of everything that changes the compiled Neuron graph.

The plugin loads whatever NEURON_COMPILED_ARTIFACTS holds without checking it matches the settings, so
the key is our only guard: same inputs, same key on any machine (canonical JSON, no paths that differ
between hosts, no timestamps); any change to the graph inputs or the compiler stack, a new key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from neuronserve.plan.facts import ModelFacts
from neuronserve.types import ModelSpec

# Bump when the key's inputs change meaning. 2: the weights digest, kv as compiled, every
# --additional-config key, NEURON_CC_FLAGS and the draft's content (plan/neuron.py _graph).
SCHEMA = 2
KEY_VERSIONS = ("vllm", "vllm-neuron", "neuronx-distributed-inference", "neuronx-cc")


def key_inputs(
    model: ModelSpec,
    model_facts: ModelFacts | None,
    graph: Mapping[str, Any],
    versions: Mapping[str, str | None],
    assets: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The exact document that is hashed (printed by tools that explain a cache miss).

    `assets`: the identity of everything else the engine reads from disk (plan/assets.py `identity`:
    LoRA adapters and a quantized checkpoint; kind, name, source, revision and local content digests;
    the draft is in `graph`). Hashed only when there is one, so the key of a launch without them is
    the one it always had and artifacts already in a cache are still found."""
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
        "graph": dict(graph),
        "versions": {name: versions.get(name) for name in KEY_VERSIONS},
    }
    if assets:
        doc["assets"] = [dict(a) for a in assets]
    return doc


def cache_key(
    model: ModelSpec,
    model_facts: ModelFacts | None,
    graph: Mapping[str, Any],
    versions: Mapping[str, str | None],
    assets: Sequence[Mapping[str, Any]] = (),
) -> str:
    inputs = key_inputs(model, model_facts, graph, versions, assets)
    doc = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()[:32]
