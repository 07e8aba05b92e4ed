"""The cache key against what NxD Inference builds, over every configuration the tier runs:

- two plans whose built configurations differ never share a key (a cache hit must load the graph asked for);
- the key's graph part predicts the configuration (test_agreement.py checks it field by field), and every
  field that differs between two built configurations of a lane is one the prediction holds, so an input
  that changes the graph cannot be left out of the key on a tested configuration.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from tests.contract import checks, sources
from tests.contract.session import Outcome, Run

if (REASON := sources.missing()) is not None:
    pytest.skip(REASON, allow_module_level=True)

# What the key holds beside the predicted configuration (plan/cachekey.py OUTSIDE_CONFIG, the model and
# assets identity): fields of the built configuration that are not the prediction's to hold. The HF config
# part is the model's config.json (the key hashes its digest); fused_spec_config's draft is the draft's
# (hashed by identity) and its class name.
NOT_PREDICTED_TOP_LEVEL = frozenset({"neuron_config", "text_config", "vision_config", "fused_spec_config"})


def _built(contract: Run) -> dict[str, Outcome]:
    return {
        cid: o
        for cid, o in contract.outcomes.items()
        if o.planned.plan is not None and o.stack is not None and o.stack.get("outcome") == "built"
    }


def _normalized(stack: dict[str, Any]) -> str:
    """The built configuration as one comparable text: NxD Inference's serialisation, paths removed
    (child.py), LoRA target modules as a set (it serialises a set in no fixed order)."""
    doc = json.loads(json.dumps(stack["serialized"]))

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: sorted(v) if k == "target_modules" and isinstance(v, list) else walk(v)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return json.dumps(walk(doc), sort_keys=True)


def test_no_two_plans_share_a_key_with_different_built_configurations(contract: Run) -> None:
    by_key: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for cid, o in _built(contract).items():
        assert o.planned.plan is not None and o.planned.plan.cache_key
        by_key[o.planned.plan.cache_key][_normalized(o.stack or {})].append(cid)
    shared = {key: dict(builds) for key, builds in by_key.items() if len(builds) > 1}
    assert not shared, "one key, different builds: " + json.dumps(shared, indent=1)[:4000]
    assert len(by_key) > 50  # the check has pairs to compare


def test_every_field_that_differs_between_built_configurations_is_predicted(contract: Run) -> None:
    """Per lane, model (the key hashes its identity apart) and configuration section (text model, vision
    encoder, draft), for each field: configurations whose predictions agree on it (both the same value, or
    both leaving it out) were built with the same value. Otherwise a field changed the graph without
    changing the prediction, and so the key."""
    built: dict[tuple[str, ...], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    example: dict[tuple[str, ...], str] = {}
    for cid, o in _built(contract).items():
        compiled = (o.planned.key_inputs.get("graph") or {}).get("compiled") or {}
        for section, fields in checks.built_sections(o.stack or {}).items():
            predicted = compiled.get(section) or {}
            for name, value in fields.items():
                said = json.dumps(predicted[name], sort_keys=True) if name in predicted else "(not predicted)"
                text = json.dumps(value, sort_keys=True)
                key = (f"{o.planned.case.lane} {o.planned.case.model}", section, name)
                built[key][said].add(text)
                example.setdefault((*key, said + text), cid)
    missed = {
        f"{lane} {section}.{name} predicted {said}": {
            text: example[(lane, section, name, said + text)] for text in texts
        }
        for (lane, section, name), by_prediction in built.items()
        for said, texts in by_prediction.items()
        if len(texts) > 1
    }
    assert not missed, (
        "one prediction, several built values (value: an example case): " + json.dumps(missed)[:4000]
    )


def test_what_the_key_leaves_to_the_model_identity_is_the_models(contract: Run) -> None:
    """Outside the neuron_config documents, the built configuration is the model's config.json (hashed by
    its digest) and the draft's: two configurations of one model and lane differ there only by the draft."""
    groups: dict[tuple[str, str], set[str]] = defaultdict(set)
    for o in _built(contract).values():
        doc = {k: v for k, v in (o.stack or {})["serialized"].items() if k not in NOT_PREDICTED_TOP_LEVEL}
        groups[(o.planned.case.lane, o.planned.case.model)].add(json.dumps(doc, sort_keys=True))
    assert {k: len(v) for k, v in groups.items() if len(v) > 1} == {}
