"""The HBM fit check of a Neuron plan: estimate per NeuronCore, warn above 90 %, refuse above 100 %.

Pure. A refusal rests on an estimate (plan/fit/memory.py), so it names its numbers and the way around it:
the settings that would fit (smallest TP, largest max_model_len or max_num_seqs), and the overrides
NEURONSERVE_HBM_GIB_PER_CORE, NEURONSERVE_HBM_OVERHEAD_GIB and NEURONSERVE_FIT_CHECK=warn|off.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from neuronserve.config.settings import Settings, env_name
from neuronserve.counts import whole
from neuronserve.errors import ConfigError
from neuronserve.plan.facts import HostFacts, ModelFacts
from neuronserve.plan.fit import eagle, instances, memory
from neuronserve.plan.fit.instances import GIB, InstanceFacts
from neuronserve.plan.resolution import Resolution

OVERRIDES = (
    "if the estimate is wrong for your model, set NEURONSERVE_HBM_OVERHEAD_GIB (default "
    f"{memory.DEFAULT_OVERHEAD_BYTES / GIB:g}) or NEURONSERVE_HBM_GIB_PER_CORE, "
    "or NEURONSERVE_FIT_CHECK=warn "
    "(docs/FIT.md)"
)


def instance_for(settings: Settings, facts: HostFacts) -> InstanceFacts | None:
    """NEURONSERVE_INSTANCE_TYPE, else the detected devices; both must agree when both exist."""
    raw = settings.logical_nc_config
    lnc = whole(raw) if raw else None
    name = settings.fit.instance_type
    declared = instances.instance_facts(name, lnc, "NEURONSERVE_INSTANCE_TYPE") if name else None
    detected = instances.facts_for_host(facts.neuron_devices, facts.physical_cores, lnc)
    if declared and detected:
        instances.check_agreement(declared, detected)
    if declared and facts.visible_cores and facts.visible_cores > declared.cores:
        raise ConfigError(
            f"{facts.cores_source} gives {facts.visible_cores} NeuronCores but NEURONSERVE_INSTANCE_TYPE="
            f"{name} has {declared.cores}: fix or unset NEURONSERVE_INSTANCE_TYPE",
            ("NEURONSERVE_INSTANCE_TYPE", facts.cores_source),
        )
    chosen = declared or detected
    if chosen and settings.fit.hbm_gib_per_core:
        chosen = replace(
            chosen,
            hbm_bytes_per_core=int(settings.fit.hbm_gib_per_core * GIB),
            source=chosen.source + " + NEURONSERVE_HBM_GIB_PER_CORE",
        )
    return chosen


def precision(dtype: str, settings: Settings, override: dict[str, Any]) -> memory.Precision:
    size = memory.DTYPE_BYTES.get(dtype.lower(), 2)
    quantized = bool(settings.get("quantization")) or override.get("quantized") is True
    return memory.Precision(size, 1 if quantized else size)


def overhead_bytes(settings: Settings) -> int:
    gib = settings.fit.overhead_gib
    return memory.DEFAULT_OVERHEAD_BYTES if gib is None else int(gib * GIB)


@dataclass(frozen=True)
class Placement:
    """What the estimate needs besides TP and tokens: the models, the instance, the overhead."""

    models: list[memory.Model]
    instance: InstanceFacts
    overhead: int

    def estimate(self, tp: int, tokens: int) -> memory.MemoryEstimate:
        return memory.estimate(self.models, tp, tokens, self.instance.hbm_bytes_per_core, self.overhead)


def _largest(fits: Callable[[int], bool], hi: int, step: int) -> int | None:
    """The largest multiple of `step` in [step, hi] for which `fits` holds (fits is monotone)."""
    lo, top = 1, hi // step
    if top < 1 or not fits(step):
        return None
    while lo < top:
        mid = (lo + top + 1) // 2
        lo, top = (mid, top) if fits(mid * step) else (lo, mid - 1)
    return lo * step


def suggestions(
    place: Placement, graph: dict[str, Any], blocks_given: bool, named: Callable[[str], str] = env_name
) -> list[str]:
    """The settings that would fit, each changed alone (a block count with the batch it can hold, when
    fewer blocks alone would fail the block-count rule: every suggestion must plan).

    Where the block is max_model_len long (transformers-neuronx's contiguous cache records it as its
    block_size; the plugin's block layout without prefix caching under its custom scheduler makes
    every block max_model_len, kv.py), a shorter length shrinks the blocks: the length is searched in
    steps of 128, not of the old block. BLOCK_SIZES stop at 128, so a block layout without prefix
    caching whose block equals a longer max_model_len is that scheduler's. `named` spells each setting
    the way the user set it (Settings.named), so following the advice never conflicts with it."""
    tp, length, seqs, kv = graph["tp"], graph["max_model_len"], graph["max_num_seqs"], graph["kv"]
    block = int(kv.get("block_size") or 0)
    per_length = kv["mode"] == "block" and block == length

    def tokens(s: int, n: int) -> int:
        if kv["mode"] == "contiguous":
            return s * n
        size = n if per_length else block
        blocks = int(kv["num_blocks"]) if blocks_given else math.ceil(n / size) * s
        return memory.block_tokens(blocks, size, kv["mode"] == "prefix")

    out: list[str] = []
    cores = place.instance.cores
    for t in instances.valid_tp_degrees(place.instance):
        if t > tp and place.estimate(t, tokens(seqs, length)).fits:
            out.append(f"{named('tensor-parallel-size')}={t} (of {cores} NeuronCores)")
            break
    if kv["mode"] != "contiguous" and blocks_given:
        blocks = named("num-gpu-blocks-override")
        best = _largest(
            lambda n: place.estimate(tp, memory.block_tokens(n, block, kv["mode"] == "prefix")).fits,
            int(kv["num_blocks"]),
            1,
        )
        per_seq = math.ceil(length / block)  # rules.check_block_layout: the plan needs per_seq * seqs
        if best and best >= per_seq * seqs:
            out.append(f"{blocks}<={best}")
        elif best and best // per_seq:  # fewer blocks alone would be refused next: fewer sequences too
            out.append(f"{blocks}<={best} with {named('max-num-seqs')}<={best // per_seq}")
        elif best and best // seqs:  # not even one sequence: a shorter length, in whole blocks
            out.append(f"{named('max-model-len')}<={best // seqs * block} with {blocks}<={best}")
        return out
    step = 128 if kv["mode"] == "contiguous" or per_length else block
    best_len = _largest(lambda n: place.estimate(tp, tokens(seqs, n)).fits, length, step)
    if best_len:
        out.append(f"{named('max-model-len')}<={best_len}")
    best_seqs = _largest(lambda s: place.estimate(tp, tokens(s, length)).fits, seqs, 1)
    if best_seqs:
        out.append(f"{named('max-num-seqs')}<={best_seqs}")
    return out


def check_fit(
    settings: Settings, facts: HostFacts, graph: dict[str, Any], model: ModelFacts | None, res: Resolution
) -> tuple[InstanceFacts | None, memory.MemoryEstimate | None, Placement | None]:
    """Estimate the plan's HBM per core; refuse (exit 2) over 100 %, warn over 90 %, skip with a reason.
    The placement (models and instance) is returned for the speed estimate (plan/fit/estimate_plan.py)."""
    if settings.fit.mode == "off":
        return None, None, None
    instance = instance_for(settings, facts)
    if instance is None:
        res.warn(
            "HBM fit not checked: no instance facts (no Neuron devices detected): set "
            "NEURONSERVE_INSTANCE_TYPE (e.g. ml.inf2.xlarge) to check it before compiling"
        )
        return None, None, None
    if model is None or not model.config:
        res.warn(
            "HBM fit not checked: the model has no local config.json yet (hub or s3:// model); "
            "run `neuronserve plan --recommend --model-config config.json` to check it beforehand"
        )
        return instance, None, None
    try:
        models = [
            memory.Model(
                memory.model_shape(model.config),
                precision(graph["dtype"], settings, graph["override"]),
                model.checkpoint_params,
            )
        ]
    except memory.ShapeError as err:
        res.warn(f"HBM fit not checked: {err}")
        return instance, None, None
    name = res.speculation.draft
    draft = facts.paths.get(name) if name else None
    if name and draft and draft.config:
        try:
            shape = memory.model_shape(draft.config)
            models.append(memory.Model(shape, models[0].precision, draft.checkpoint_params))
        except memory.ShapeError as err:
            res.warn(f"speculative draft {name} not counted in the HBM estimate: {err}")
    elif name and eagle.is_eagle(res.speculation.method):
        models.append(eagle.head(models[0], res.speculation.method))
        res.warn(
            f"speculative draft {name}: no local config.json; counted as the EAGLE head its target "
            "implies (one layer, fc, embedding and lm_head of the target's shape: docs/FIT.md)"
        )
    elif name:
        res.warn(f"speculative draft {name} not counted in the HBM estimate: no local config.json")
    place = Placement(models, instance, overhead_bytes(settings))
    tokens = memory.kv_tokens(graph["kv"], graph["max_num_seqs"], graph["max_model_len"])
    est = place.estimate(graph["tp"], tokens)
    where = f"{instance.name} ({instance.chip})"
    if not est.fits:
        fixes = suggestions(place, graph, settings.get("num-gpu-blocks-override") is not None, settings.named)
        message = (
            f"HBM estimate on {where}: {est.describe()}: does not fit; "
            + (
                f"set {', or '.join(fixes)}"
                if fixes
                else "no TP, length or batch on this instance fits; pick a larger instance"
            )
            + f"; {OVERRIDES}"
        )
        if settings.fit.mode == "refuse":
            raise ConfigError(
                message,
                (
                    *(settings.named(k) for k in ("tensor-parallel-size", "max-model-len", "max-num-seqs")),
                    "NEURONSERVE_FIT_CHECK",
                ),
            )
        res.warn(message + " (NEURONSERVE_FIT_CHECK=warn: not refused)")
    elif est.utilization > memory.WARN_UTILIZATION:
        res.warn(
            f"HBM estimate on {where}: {est.describe()}: above {memory.WARN_UTILIZATION:.0%}, "
            f"the load may run out of device memory; {OVERRIDES}"
        )
    return instance, est, place
