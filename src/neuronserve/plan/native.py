"""The hook for the rewritten plugin's lane (2.32, vllm-neuron 0.24.0.1.1.0): the Neuron engine
rendered as that plugin takes it (`--additional-config '{"neuron_config": {...}}'`, renamed fields, its
own compile cache). The renderer is a separate pure module; plan/neuron.py's `neuron_engine` calls
`native_engine` for every lane whose generation is "native" (plan/lanes.py), after the framework has
refused the instances the lane cannot run (lanes.check_instance).

Lane 2.32 is rendered by plan/lane232run.py; a "native" lane with no renderer in this build is refused
here, naming the lanes that plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from neuronserve.errors import ConfigError

if TYPE_CHECKING:
    from neuronserve.config.settings import Settings
    from neuronserve.plan.facts import HostFacts, ModelFacts
    from neuronserve.plan.lanes import Lane
    from neuronserve.plan.neuron import NeuronEngine
    from neuronserve.plan.resolution import Resolution


def native_engine(
    settings: Settings,
    facts: HostFacts,
    model_uri: str,
    model: ModelFacts | None,
    res: Resolution,
    *,
    lane: Lane,
) -> NeuronEngine:
    """Render the Neuron engine for a "native" lane: lane 2.32's renderer (plan/lane232run.py)."""
    if lane.lane == "2.32":
        from neuronserve.plan import lane232run  # noqa: PLC0415 (plan/neuron.py imports this module)

        return lane232run.neuron_engine(settings, facts, model_uri, model, res, lane=lane)
    raise ConfigError(
        f"lane {lane.lane} (vllm-neuron {lane.vllm_neuron}) has no renderer in this build: "
        "use NEURONSERVE_STACK=2.28 or 2.27",
        ("NEURONSERVE_STACK",),
    )
