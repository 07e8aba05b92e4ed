"""TP x DP against the NeuronCores of the declared instance type (pure), whatever the HBM fit check says.

Why: planning on a laptop sees no devices, so the core counts were checked against nothing: TP 4 on an
ml.inf2.xlarge (2 NeuronCores) planned, said the memory fit, and set NEURON_RT_VISIBLE_CORES=0-3; the
runtime refuses that only after the download and the compile. The instance type alone says how many
cores there are (plan/fit/instances.py: chips x cores per chip, over NEURON_LOGICAL_NC_CONFIG on Trn2,
where TP counts logical cores), so TP, DP x TP and the core ids in NEURON_RT_VISIBLE_CORES are refused
here when they need more. This is a count, not an estimate: NEURONSERVE_FIT_CHECK=off does not skip it.

The same instance facts decide which TP degrees tile it (plan/fit/instances.valid_tp_degrees, the degrees
`plan --recommend` offers): a TP outside them (TP 3 or 5 on inf2.24xlarge, TP 7 on trn1.32xlarge) is refused
here too, naming the valid ones, so `plan`, `--recommend` and every deploy renderer answer with one rule
(docs/FIT.md, "Which TP degrees an instance takes").
"""

from __future__ import annotations

from neuronserve.config.settings import Settings
from neuronserve.counts import whole
from neuronserve.errors import ConfigError
from neuronserve.plan import replicas
from neuronserve.plan.facts import parse_core_list
from neuronserve.plan.fit import instances
from neuronserve.plan.fit.instances import InstanceFacts

INSTANCE_VAR = "NEURONSERVE_INSTANCE_TYPE"


def declared_instance(settings: Settings) -> InstanceFacts | None:
    """The declared instance type's facts at the configured LNC; None when none is declared or its
    family has no figures yet (plan/fit/instances.py UNTABULATED: the fit check says so)."""
    name = settings.fit.instance_type
    if not name or instances.normalize(name).split(".")[0] in instances.UNTABULATED:
        return None
    raw = settings.logical_nc_config
    return instances.instance_facts(name, whole(raw) if raw else None, INSTANCE_VAR)


def _has(instance: InstanceFacts) -> str:
    """`ml.inf2.xlarge has 2 NeuronCores (1 Inferentia2 chip x 2)`, LNC said where it divides."""
    chip = instances.INSTANCES[instance.name][0]
    per_chip = chip.physical_cores // instance.logical_nc_config
    lnc = f", LNC {instance.logical_nc_config}" if chip.default_lnc != 1 else ""
    plural = "s" if instance.chips > 1 else ""
    return (
        f"has {instance.cores} NeuronCores ({instance.chips} {instance.chip} chip{plural} x {per_chip}{lnc})"
    )


def _larger(instance: InstanceFacts, needed: int) -> str:
    """The smallest instance of the same chip with `needed` cores, as advice (empty when none)."""
    chip = instances.INSTANCES[instance.name][0]
    per_chip = chip.physical_cores // instance.logical_nc_config
    fits = [
        (chips * per_chip, name)
        for name, (other, chips) in instances.INSTANCES.items()
        if other is chip and chips * per_chip >= needed
    ]
    if not fits:
        return ""
    cores, name = min(fits)
    return f", or plan for a larger instance ({name}: {cores} NeuronCores)"


def check_cores(settings: Settings, instance: InstanceFacts | None, tp: int) -> None:
    """Refuse TP, DP x TP or a visible core id beyond the declared `instance` (declared_instance)."""
    if instance is None:
        return
    name = f"{INSTANCE_VAR}={settings.fit.instance_type}"
    tp_origin = settings.origin("tensor-parallel-size", "SM_VLLM_TENSOR_PARALLEL_SIZE")
    if tp > instance.cores:
        raise ConfigError(
            f"{tp_origin}={tp} needs {tp} NeuronCores, but {name} {_has(instance)}: set {tp_origin} to at "
            f"most {instance.cores}{_larger(instance, tp)}",
            (tp_origin, INSTANCE_VAR),
        )
    valid = instances.valid_tp_degrees(instance)
    if tp not in valid:
        per_chip = instance.cores // instance.chips
        raise ConfigError(
            f"{tp_origin}={tp} does not tile {name}, which {_has(instance)}: a TP group must fit inside one "
            f"chip or span whole chips ({per_chip} NeuronCores each) and divide the {instance.cores} cores "
            f"into whole replicas: set {tp_origin} to one of {', '.join(map(str, valid))} "
            "(the degrees `neuronserve plan --recommend` offers; docs/FIT.md)",
            (tp_origin, INSTANCE_VAR),
        )
    dp, dp_origin = replicas.requested(settings)
    if dp is not None and dp * tp > instance.cores:
        raise ConfigError(
            f"{dp_origin}={dp} replicas x {tp_origin}={tp} = {dp * tp} NeuronCores, but {name} "
            f"{_has(instance)}: set {dp_origin} to at most {instance.cores // tp}"
            + _larger(instance, dp * tp),
            (dp_origin, tp_origin, INSTANCE_VAR),
        )
    if settings.visible_cores:
        beyond = [c for c in parse_core_list(settings.visible_cores) if c >= instance.cores]
        if beyond:
            raise ConfigError(
                f"NEURON_RT_VISIBLE_CORES={settings.visible_cores} names core {beyond[0]}, but {name} "
                f"{_has(instance)}, ids 0 to {instance.cores - 1}: fix NEURON_RT_VISIBLE_CORES or "
                f"{INSTANCE_VAR}",
                ("NEURON_RT_VISIBLE_CORES", INSTANCE_VAR),
            )
