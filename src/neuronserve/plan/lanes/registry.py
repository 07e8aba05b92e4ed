"""The lane registry: every lane by id, each a `Lane` with its pins, its rules and its engine renderer,
and the choice of the lane a plan is for.

One repository plans four stacks (docs/LANES.md). The plan's rules are the plugin's rules, and the
plugin changed twice: 0.4.1 (SDK 2.28) keeps NxD Inference and `override_neuron_config` but loads LoRA
at run time and lifts limits; 0.24.0.1.1.0 (SDK 2.32) is a rewrite with its own models and a
`neuron_config` of renamed fields. So the lane is chosen first, from the plugin the image has
(`facts.versions["vllm-neuron"]`), or from NEURONSERVE_STACK when planning on a laptop, and plan/build.py
renders the engine with the lane's own renderer (`lane.engine`): the NxD Inference lanes share
plan/lanes/nxdi/ and differ by their plugin profile (`lane.rules`), the 2.32 and 2.33 lanes share
plan/lanes/native/ and differ by `lane.native` (plan/lanes/native/rules.py).

Adding a lane: its entry below (and its id in neuronserve/lane_ids.py, which config/ reads), with a
renderer from its folder under plan/lanes/ (docs/DESIGN.md).

Pure: the facts and the settings are passed in.
"""

from __future__ import annotations

from neuronserve.errors import ConfigError
from neuronserve.plan.facts import HostFacts
from neuronserve.plan.fit import instances
from neuronserve.plan.lanes.lane import Lane
from neuronserve.plan.lanes.native import engine as native
from neuronserve.plan.lanes.native.rules import V0_24, V0_29
from neuronserve.plan.lanes.nxdi import engine as nxdi
from neuronserve.plan.lanes.nxdi.profiles import V0_2, V0_4

STACK_VAR = "NEURONSERVE_STACK"
INSTANCE_VAR = "NEURONSERVE_INSTANCE_TYPE"

# Pins from AWS's release notes and DLC Dockerfiles, equal to docker/lanes/<lane>.env's NEURON_SDK_VERSION,
# VLLM_NEURON_VERSION and VLLM_VERSION (tests/unit/plan/lanes/test_registry.py); the plugin sources are under
# whn09/vllm-neuron (ad82965 for 0.2.2+lts, 4fac6b7 for 0.4.1) and the 2.32 plugin's docs under
# aws-neuron/aws-neuron-sdk vllm-neuron/docs/. 0.1.x and 0.2.0 plugins are planned as 2.27, as before.
LANE_2_27 = Lane(
    "2.27",
    "2.27.1",
    "0.2.2+lts",
    "0.11.0",
    "nxdi",
    ("inf2", "trn1", "trn1n", "trn2", "trn2u"),
    ("0.1", "0.2", "0.3"),
    "vllm-0.11.0-cli.json",
    engine=nxdi.neuron_engine,
    rules=V0_2,
)
LANE_2_28 = Lane(
    "2.28",
    "2.28.0",
    "0.4.1",
    "0.13.0",
    "nxdi",
    ("inf2", "trn1", "trn1n", "trn2", "trn2u"),
    ("0.4",),
    "vllm-0.13.0-cli.json",
    engine=nxdi.neuron_engine,
    rules=V0_4,
)
LANE_2_32 = Lane(
    "2.32",
    "2.32.0",
    "0.24.0.1.1.0",
    "0.24.0",
    "native",
    ("trn2", "trn2u", "trn3"),
    ("0.24",),
    "vllm-0.24.0-cli.json",
    engine=native.neuron_engine,
    native=V0_24,
)
# Lane 2.33: vLLM Neuron 0.29.0.1.2.0 (Beta) on vLLM 0.29.0 (SDK 2.33.0's component release notes,
# docs at v2.33.0; docker/lanes/2.33.env cites every pin). The same renderer as 2.32 with 0.29's
# differences (native route, precompile cache, keyed VLLM_CACHE_ROOT): plan/lanes/native/rules.py. SDK
# 2.34 (vLLM Neuron GA on vLLM 0.32.0) is not a lane yet: its plugin's exact version and pins were in no
# public package list on 2026-12-07 (docs/LANES.md).
LANE_2_33 = Lane(
    "2.33",
    "2.33.0",
    "0.29.0.1.2.0",
    "0.29.0",
    "native",
    ("trn2", "trn2u", "trn3"),
    ("0.29",),
    "vllm-0.29.0-cli.json",
    engine=native.neuron_engine,
    native=V0_29,
)
LANES: dict[str, Lane] = {lane.lane: lane for lane in (LANE_2_27, LANE_2_28, LANE_2_32, LANE_2_33)}
DEFAULT = LANE_2_27  # when neither NEURONSERVE_STACK nor an installed plugin says


def lane_of_plugin(version: str | None) -> Lane | None:
    """The lane an installed vllm-neuron version belongs to (by major.minor), None when none is
    installed; a version no lane knows is refused: its rules are not the plan's."""
    if not version:
        return None
    parts = version.strip().split("+")[0].split(".")
    series = ".".join(parts[:2])
    for lane in LANES.values():
        if series in lane.plugin_series:
            return lane
    raise ConfigError(
        f"the installed vllm-neuron {version} is no lane's plugin: neuronserve plans "
        + ", ".join(f"{lane.lane} (vllm-neuron {lane.vllm_neuron})" for lane in LANES.values())
        + "; build the image with one of them (docker build --build-arg LANE=<lane>)",
        (STACK_VAR,),
    )


def choose_lane(stack: str | None, facts: HostFacts) -> Lane:
    """NEURONSERVE_STACK or the installed plugin's lane; 2.27 when neither says.

    Both given and different is refused naming both: the plan would check rules the engine does not
    run. An unknown NEURONSERVE_STACK is refused by its row's parser (config/hosttable.py) and again
    here, listing the lanes, for callers that build Settings by hand."""
    installed = lane_of_plugin(facts.versions.get("vllm-neuron"))
    if stack is None:
        return installed or DEFAULT
    chosen = LANES.get(stack.strip())
    if chosen is None:
        raise ConfigError(f"{STACK_VAR}={stack!r} is not a lane: use one of {', '.join(LANES)}", (STACK_VAR,))
    if installed is not None and installed is not chosen:
        raise ConfigError(
            f"{STACK_VAR}={stack} disagrees with the installed vllm-neuron "
            f"{facts.versions.get('vllm-neuron')} (lane {installed.lane}): unset {STACK_VAR} or run the "
            f"lane {chosen.lane} image",
            (STACK_VAR,),
        )
    return chosen


def instance_family(instance_type: str | None, facts: HostFacts) -> tuple[tuple[str, ...], str] | None:
    """The instance families this plan may run on and where that came from: the declared
    NEURONSERVE_INSTANCE_TYPE, else the detected devices (2 NeuronCores per device: inf2 or trn1;
    8: trn2, as plan/cachekey.py's neuron_target tells them apart). None when nothing says."""
    if instance_type:
        family = instances.normalize(instance_type).split(".")[0]
        return (family,), f"{INSTANCE_VAR}={instance_type}"
    cores, devices = facts.physical_cores, facts.neuron_devices
    if devices > 0 and cores and cores % devices == 0:
        per_device = cores // devices
        if per_device == instances.INFERENTIA2.physical_cores:
            return ("inf2", "trn1"), f"the detected devices ({devices} x {per_device} NeuronCore-v2)"
        if per_device == instances.TRAINIUM2.physical_cores:
            return ("trn2",), f"the detected devices ({devices} x {per_device} NeuronCore-v3)"
    return None


def _newest_running(families: list[str]) -> str:
    """The newest lane that runs every one of `families` (2.28 for inf2/trn1, 2.33 for trn3)."""
    running = [each for each in LANES.values() if all(f in each.families for f in families)]
    return max(running or [DEFAULT], key=lambda each: tuple(int(p) for p in each.lane.split("."))).lane


def check_instance(lane: Lane, instance_type: str | None, facts: HostFacts) -> None:
    """Refuse, before any download, an instance the lane cannot run (inf2/trn1 on 2.32: the rewritten
    plugin supports Trn2 and Trn3 only), pointing to the newest lane that runs it."""
    found = instance_family(instance_type, facts)
    if found is None:
        return
    families, source = found
    known = {f for each in LANES.values() for f in each.families}  # others: the fit check names them
    refused = [f for f in families if f in known and f not in lane.families]
    if not refused:
        return
    pointer = _newest_running(refused)
    raise ConfigError(
        f"{source}: lane {lane.lane} (vllm-neuron {lane.vllm_neuron}) runs on "
        f"{', '.join(lane.families)} only, not {'/'.join(refused)}: use lane {pointer} "
        f"({STACK_VAR}={pointer}, the lane {pointer} image) for this instance",
        (STACK_VAR, INSTANCE_VAR),
    )
