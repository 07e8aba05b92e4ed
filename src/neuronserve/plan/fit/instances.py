"""Instance facts: NeuronCores, HBM and HBM bandwidth per core for every Inf2, Trn1/Trn1n and Trn2 size.

The one table in the code base (deploy/instances.py reads it too). Per-chip figures are AWS's (the
Neuron documentation's architecture pages, general/arch/neuron-hardware/inferentia2, trainium and
trainium2): Inferentia2 and Trainium each carry 2 NeuronCore-v2, 32 GiB HBM and 820 GB/s; Trainium2
carries 8 physical NeuronCore-v3, 96 GiB and 2.9 TB/s. On Trn2 the runtime groups
`NEURON_LOGICAL_NC_CONFIG` physical cores into one logical core (2 by default), so a logical core owns
that many physical cores' HBM and bandwidth; the plugin and NxD Inference see logical cores only.

Pure: callers pass the names and the LNC they read; `facts_for_host` derives the same facts from
what a live host reports (device count and cores per device), and `check_agreement` refuses a
declared instance type that the detected devices contradict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from neuronserve.errors import ConfigError

GIB = 1024**3


@dataclass(frozen=True)
class Chip:
    name: str
    physical_cores: int  # NeuronCores per chip
    hbm_bytes: int  # per chip
    hbm_bytes_per_s: float  # per chip
    default_lnc: int  # physical cores per logical core when NEURON_LOGICAL_NC_CONFIG is unset


INFERENTIA2 = Chip("Inferentia2", 2, 32 * GIB, 820e9, 1)
TRAINIUM = Chip("Trainium", 2, 32 * GIB, 820e9, 1)
TRAINIUM2 = Chip("Trainium2", 8, 96 * GIB, 2.9e12, 2)

# instance type (without the SageMaker `ml.` prefix) -> (chip, chips)
INSTANCES: dict[str, tuple[Chip, int]] = {
    "inf2.xlarge": (INFERENTIA2, 1),
    "inf2.8xlarge": (INFERENTIA2, 1),
    "inf2.24xlarge": (INFERENTIA2, 6),
    "inf2.48xlarge": (INFERENTIA2, 12),
    "trn1.2xlarge": (TRAINIUM, 1),
    "trn1.32xlarge": (TRAINIUM, 16),
    "trn1n.32xlarge": (TRAINIUM, 16),
    "trn2.3xlarge": (TRAINIUM2, 1),
    "trn2.48xlarge": (TRAINIUM2, 16),
    "trn2u.48xlarge": (TRAINIUM2, 16),
}
# Families a stack lane runs (plan/lanes/registry.py: trn3 on lane 2.32) that this table cannot hold yet:
# named, so a declared trn3 instance is told how to plan without the fit check instead of "not a Neuron
# instance type". Trainium3's chip is published (aws-neuron-sdk about-neuron/arch/neuron-hardware/
# trainium3.rst: 8 NeuronCore-v4, 144 GiB at 4.9 TB/s), its instance types are not: trn3-arch.rst (commit
# 6e694cbb) gives only UltraServers (Gen1: 4 servers of 16 chips; Gen2: 36 servers of 4 chips), no type
# names; the names seen (trn3.48xlarge, trn3p.48xlarge, trn3pd98.3xlarge, "Trn3pds") come from the Neuron
# driver's platform table (aws-neuron-driver v4/neuron_dhal_v4.c) and the EKS UltraServer operator's
# preview page, neither of which says how many chips each has (searched 2026-12-07; docs/FIT.md). Nor
# does EC2 sell one yet: botocore 1.43.67's EC2 API model (ec2/2016-11-15/service-2.json, 2026-08-07)
# and Karpenter's generated instance data (aws/karpenter-provider-aws @6fc13b52, 2026-07-20) list no
# trn3 type. Karpenter's data agree with every row above (chips, NeuronCores, 32 GiB per Inferentia2 and
# Trainium chip).
UNTABULATED = {"trn3": "Trainium3"}
# Neuron families vLLM on Neuron never serves: Inferentia1's NeuronCore-v1 runs only the Neuron SDK's
# first-generation stack (torch-neuron, transformers-neuronx's inf1 builds); vllm-neuron and NxD
# Inference need NeuronCore-v2 or later (Inf2, Trn1, Trn2: the instance families this table holds).
UNSERVED = {"inf1": "Inferentia1"}


def refuse_unserved(name: str, origin: str) -> None:
    """A ConfigError for an instance of a family vLLM on Neuron does not serve (inf1), naming it."""
    family = normalize(name).split(".")[0]
    if family in UNSERVED:
        raise ConfigError(
            f"{origin}={name!r} is {UNSERVED[family]} ({family}), which vLLM on Neuron does not serve "
            "(vllm-neuron and NxD Inference run on NeuronCore-v2 and later): use an inf2, trn1 or trn2 "
            "instance (`neuronserve plan --recommend` picks one)",
            (origin,),
        )


@dataclass(frozen=True)
class InstanceFacts:
    """What one process may use, per (logical) NeuronCore: the plan's unit of memory and bandwidth."""

    name: str  # e.g. "inf2.48xlarge", or "detected: 12 x Inferentia2/Trainium"
    chip: str
    chips: int
    cores: int  # logical NeuronCores (what tensor_parallel_size counts)
    logical_nc_config: int
    hbm_bytes_per_core: int
    hbm_bytes_per_s_per_core: float
    source: str  # where the facts came from, named in messages

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "chip": self.chip,
            "chips": self.chips,
            "neuron_cores": self.cores,
            "logical_nc_config": self.logical_nc_config,
            "hbm_bytes_per_core": self.hbm_bytes_per_core,
            "hbm_bytes_per_s_per_core": self.hbm_bytes_per_s_per_core,
            "source": self.source,
        }


def normalize(name: str) -> str:
    """`ml.inf2.xlarge` and `inf2.xlarge` name the same hardware."""
    text = name.strip().lower()
    return text[3:] if text.startswith("ml.") else text


def _lnc(chip: Chip, lnc: int | None, origin: str) -> int:
    if lnc is None:
        return chip.default_lnc
    if chip.physical_cores == 2 and lnc != 1:
        raise ConfigError(
            f"NEURON_LOGICAL_NC_CONFIG={lnc} applies to Trn2 only; {chip.name} has no logical cores "
            f"({origin}): unset NEURON_LOGICAL_NC_CONFIG",
            ("NEURON_LOGICAL_NC_CONFIG",),
        )
    if lnc not in (1, 2):
        raise ConfigError(
            f"NEURON_LOGICAL_NC_CONFIG={lnc}: Trn2 accepts 1 or 2", ("NEURON_LOGICAL_NC_CONFIG",)
        )
    return lnc


def _facts(name: str, chip: Chip, chips: int, lnc: int, source: str) -> InstanceFacts:
    return InstanceFacts(
        name=name,
        chip=chip.name,
        chips=chips,
        cores=chips * chip.physical_cores // lnc,
        logical_nc_config=lnc,
        hbm_bytes_per_core=chip.hbm_bytes * lnc // chip.physical_cores,
        hbm_bytes_per_s_per_core=chip.hbm_bytes_per_s * lnc / chip.physical_cores,
        source=source,
    )


def instance_facts(name: str, lnc: int | None = None, origin: str = "--instance-type") -> InstanceFacts:
    """Facts of a named instance type; ConfigError naming the known types otherwise."""
    key = normalize(name)
    family = key.split(".")[0]
    refuse_unserved(name, origin)
    if key not in INSTANCES and family in UNTABULATED:
        raise ConfigError(
            f"{origin}={name!r}: {UNTABULATED[family]} has no HBM figures in this build's instance table "
            "(plan/fit/instances.py), so the HBM fit cannot be checked: set NEURONSERVE_FIT_CHECK=off "
            f"to plan without it (lane 2.32 runs {family})",
            (origin, "NEURONSERVE_FIT_CHECK"),
        )
    if key not in INSTANCES:
        known = ", ".join(INSTANCES)
        raise ConfigError(
            f"{origin}={name!r} is not a Neuron instance type: use one of {known} (with or without `ml.`)",
            (origin,),
        )
    chip, chips = INSTANCES[key]
    return _facts(key, chip, chips, _lnc(chip, lnc, origin), origin)


def facts_for_host(devices: int, physical_cores: int | None, lnc: int | None) -> InstanceFacts | None:
    """Facts of a live host from its devices: 2 cores per device is NeuronCore-v2 (Inf2 and Trn1 have
    the same per-core HBM and bandwidth), 8 is Trainium2. None when the host says too little."""
    if devices <= 0 or not physical_cores or physical_cores % devices:
        return None
    per_device = physical_cores // devices
    chip = {2: INFERENTIA2, 8: TRAINIUM2}.get(per_device)
    if chip is None:
        return None
    label = "Inferentia2/Trainium" if chip is INFERENTIA2 else chip.name
    lnc_used = _lnc(chip, lnc, "detected devices")
    facts = _facts(f"detected: {devices} x {label}", chip, devices, lnc_used, "detected devices")
    return replace(facts, chip=label)


def check_agreement(declared: InstanceFacts, detected: InstanceFacts) -> None:
    """A declared instance type must describe the devices this host has (else the estimate lies)."""
    if declared.cores != detected.cores or declared.hbm_bytes_per_core != detected.hbm_bytes_per_core:
        raise ConfigError(
            f"{declared.source}={declared.name} ({declared.cores} NeuronCores of "
            f"{declared.hbm_bytes_per_core / GIB:g} GiB) disagrees with this host's devices "
            f"({detected.cores} NeuronCores of {detected.hbm_bytes_per_core / GIB:g} GiB): "
            f"fix or unset {declared.source}",
            (declared.source,),
        )


def neuron_cores(name: str) -> int:
    """Logical NeuronCores of an instance type at its default LNC (what deploy checks TP against)."""
    return instance_facts(name).cores


def valid_tp_degrees(instance: InstanceFacts) -> list[int]:
    """TP degrees neuronserve plans with on this instance: divisors of its cores (so DP = cores // TP
    replicas tile it) that either fit inside one chip or span whole chips.

    This is neuronserve's rule, not a list read from NxD Inference: NxD pads heads to any TP
    (modules/attention/gqa.py:100-120 at v0.7.14366) and vllm-neuron 0.2.2+lts skips vLLM's head check
    (platform.py:108 installs platform_overrides.py:16-38), so the limits left are the collectives'
    topology, which rings within and across whole chips.
    """
    per_chip = instance.cores // instance.chips
    return [
        t
        for t in range(1, instance.cores + 1)
        if instance.cores % t == 0 and (per_chip % t == 0 or t % per_chip == 0)
    ]
