"""One lane: its pins, its rules, and its engine renderer; and the Neuron engine a renderer returns.

The renderer is declared once here (`EngineRenderer`) and called as `lane.engine(...)` by
plan/build.py: each generation implements it in its own folder (nxdi/engine.py, native/engine.py), so no
module dispatches on a lane id and the lanes do not import one another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from neuronserve.types import Integration, RequestSupport

if TYPE_CHECKING:
    from neuronserve.config.settings import Settings
    from neuronserve.plan.facts import HostFacts, ModelFacts
    from neuronserve.plan.lanes.native.rules import NativeRules
    from neuronserve.plan.lanes.nxdi.profiles import PluginRules
    from neuronserve.plan.resolution import Resolution

# Engine settings every renderer renders itself: never passed through as generic flags (plan/command.py).
CONSUMED = frozenset(
    {
        "tensor-parallel-size",
        "max-model-len",
        "max-num-seqs",
        "dtype",
        "enable-prefix-caching",
        "block-size",
        "num-gpu-blocks-override",
        "enable-chunked-prefill",
        "max-num-batched-tokens",
        "additional-config",
        "device",
        "override-neuron-config",
    }
)


@dataclass(frozen=True)
class NeuronEngine:
    """A rendered Neuron engine: what plan/build.py puts in the LaunchPlan."""

    flags: list[str]  # engine flags after --model/--host/--port
    override: dict[str, Any]
    env: dict[str, str]
    integration: Integration
    graph: dict[str, Any]  # everything that changes the compiled graph (for the cache key)
    support: RequestSupport  # what requests may ask of this engine (before the adapters are added)
    # The engine environment that points it at the compiled-artifact directory (plan/build.py gives it
    # the local directory); None: NEURON_COMPILED_ARTIFACTS=<dir>, as vllm-neuron 0.2.x/0.4.x read it.
    cache_env: Callable[[str], dict[str, str]] | None = None
    # Where the lane's engine compiles, under the keyed artifact directory ("" = that directory itself;
    # lane 2.32: neuron/compile_cache under VLLM_CACHE_ROOT; lane 2.33: VLLM_CACHE_ROOT itself,
    # plan/lanes/native/rules.py).
    artifacts_subdir: str = ""
    # Entries the plan adds to `plan --json` "stack" beside the lane's pins (the NxD Inference lanes: the
    # model registry the architecture was checked against, "nxd_inference").
    stack: dict[str, Any] = field(default_factory=dict)

    def artifacts_env(self, local_dir: str) -> dict[str, str]:
        if self.cache_env is None:
            return {"NEURON_COMPILED_ARTIFACTS": local_dir}
        return self.cache_env(local_dir)


class EngineRenderer(Protocol):
    """Resolve, check and render the Neuron engine of one lane (pure): the settings, the host facts,
    the model as given and its config.json facts, and the plan's Resolution (origins, warnings, the
    override the rules complete in place)."""

    def __call__(
        self,
        settings: Settings,
        facts: HostFacts,
        model_uri: str,
        model: ModelFacts | None,
        res: Resolution,
        *,
        lane: Lane,
    ) -> NeuronEngine: ...


@dataclass(frozen=True)
class Lane:
    """One stack: its pins (reported by `plan --json` "stack", /info, /version and build_info), what the
    plan needs to know about it, and how its engine is rendered.

    `generation`: "nxdi" = vllm-neuron on NxD Inference (`--additional-config
    {"override_neuron_config": ...}`, 0.2.x and 0.4.x); "native" = the rewritten plugin
    (`--additional-config {"neuron_config": ...}`). `families`: the instance families the lane runs on
    (instance type prefixes, plan/fit/instances.py names). `plugin_series`: the installed vllm-neuron
    versions ("major.minor") that mean this lane. `cli_table`: the vLLM CLI table its flags are
    checked against (src/neuronserve/data, plan/flagcheck.py). `engine`: its renderer. `rules`: its
    plugin profile where the renderer shares the NxD Inference rules (plan/lanes/nxdi/profiles.py); None
    for a renderer with rules of its own. `native`: what a rewritten-plugin lane differs in
    (plan/lanes/native/rules.py), read by that one renderer; None for the NxD Inference lanes."""

    lane: str
    sdk: str
    vllm_neuron: str
    vllm: str
    generation: str
    families: tuple[str, ...]
    plugin_series: tuple[str, ...]
    cli_table: str
    engine: EngineRenderer
    rules: PluginRules | None = None
    native: NativeRules | None = None

    def stack_json(self) -> dict[str, str]:
        """The `plan --json` "stack" object: exactly these four keys."""
        return {"lane": self.lane, "sdk": self.sdk, "vllm_neuron": self.vllm_neuron, "vllm": self.vllm}
