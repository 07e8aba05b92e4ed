"""The facts the plan is given about the host: plain frozen data, the core-list grammar, and the one
test for a whole number in the JSON those facts (config.json) and the override objects hold.

The plan never looks at the machine itself; `neuronserve.host` gathers these (the only I/O of planning)
and tests build them by hand for any instance type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeGuard

from neuronserve.errors import ConfigError

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


@dataclass(frozen=True)
class ModelFacts:
    """What a local model directory says about itself (config.json), for rules and the cache key."""

    kind: str  # "dir" | "file" | "missing"
    config: dict[str, Any] | None = None
    config_sha256: str | None = None
    has_lm_head: bool | None = None  # for EAGLE drafts: weights name lm_head.weight
    checkpoint_params: int | None = None  # parameters in the safetensors headers (HBM estimate)
    weights_digest: str | None = None  # weights_digest(): sampled weight bytes, for the cache key


@dataclass(frozen=True)
class HostFacts:
    python: str = "python3"
    vllm_module: str = API_SERVER_MODULE
    neuron_devices: int = 0
    visible_cores: int | None = None  # NeuronCores this process may use (logical on Trn2)
    cores_source: str = "unknown"
    logical_nc_config: int | None = None
    physical_cores: int | None = None  # neuron-ls's NeuronCore count (all devices), for instance facts
    versions: dict[str, str | None] = field(default_factory=dict)
    # The installed NxD Inference's MODEL_TYPES (model type -> tasks), read by host/nxdi.py without importing
    # it; None when it is not installed here or could not be read (the plan assumes its lane's then).
    nxdi_models: dict[str, tuple[str, ...]] | None = None
    sagemaker_model_dir: str = "/opt/ml/model"
    sagemaker_model_dir_nonempty: bool = False
    paths: dict[str, ModelFacts] = field(default_factory=dict)  # model candidates that are local
    cpus: tuple[int, ...] = ()  # CPU ids this process may run on (CPU replicas are bound to slices)
    # vLLM option tables by file name (Lane.cli_table; host/clitables.py reads the packaged ones): the
    # engine flags are checked against them (plan/flagcheck.py). None: not gathered, not checked.
    option_tables: dict[str, dict[str, Any]] | None = None


def json_int(value: object) -> TypeGuard[int]:
    """A whole number as JSON has it, for the counts the plan reads from config.json and override
    objects: an int that is no bool. Python counts True as 1, but JSON `true` is no number, so
    `"num_hidden_layers": true` or a bucket list `[true]` must not pass as a count."""
    return isinstance(value, int) and not isinstance(value, bool)


def _core_id(text: str) -> int:
    """ASCII digits only: int() also reads "1_0" as 10 and "٣" as 3, which the plan would count and
    the Neuron runtime, which receives the text unchanged, would not."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        raise ValueError(text)
    return int(text)


def parse_core_list(spec: str, name: str = "NEURON_RT_VISIBLE_CORES") -> list[int]:
    """`0-3`, `0,1`, `4-7,9` -> core ids (what the Neuron runtime accepts)."""
    cores: list[int] = []
    try:
        for part in spec.split(","):
            first, dash, last = part.strip().partition("-")
            lo = _core_id(first)
            hi = _core_id(last) if dash else lo
            if hi < lo:
                raise ValueError  # "0,3-1" was read as [0]: a reversed range is no range
            cores.extend(range(lo, hi + 1))
    except ValueError:
        raise ConfigError(f"{name}={spec!r} is not a core list like 0-3 or 0,1", (name,)) from None
    if not cores or len(set(cores)) != len(cores) or min(cores) < 0:
        raise ConfigError(f"{name}={spec!r} is not a core list like 0-3 or 0,1", (name,))
    return cores
