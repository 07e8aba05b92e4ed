"""Data shapes shared by the phases (settings -> plan -> stage -> engine -> front -> publish).

The plan is the only thing the later phases read: stage, engine and front never look at the
environment again. Every path the engine will use is decided here by the pure plan, so staging only
has to make those paths exist (and the plan can be printed and checked before anything is fetched).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from neuronserve.config.serve import ServeOptions

# ServeOptions lives with its reader (config/serve.py: config never imports this module, so the two
# packages do not import each other); it is exported here too because LaunchPlan.serve carries it.
__all__ = [
    "CAPABILITIES",
    "ArtifactMode",
    "ArtifactSpec",
    "AssetFetch",
    "AssetKind",
    "AssetSpec",
    "Device",
    "LaunchPlan",
    "ModelSourceKind",
    "ModelSpec",
    "Progress",
    "ReplicaSpec",
    "RequestSupport",
    "ServeOptions",
    "StageResult",
]

Device = Literal["neuron", "cpu"]

# Where a model comes from. "sagemaker" = the /opt/ml/model directory SageMaker populated;
# "local" = a directory on this host; "s3" = an s3:// prefix copied to local disk; "archive" = a
# model.tar.gz (local or s3://) extracted to local disk; "hub" = a Hugging Face id the engine resolves.
ModelSourceKind = Literal["sagemaker", "local", "s3", "archive", "hub"]

# How compiled Neuron artifacts are handled. "off" = no artifact directory (CPU, or the user opted out);
# "local" = a local directory only, no remote cache; "keyed" = NEURONSERVE_CACHE_URI/<cache_key>/;
# "explicit" = the user set NEURON_COMPILED_ARTIFACTS=s3://... (an unkeyed location, honoured as is).
ArtifactMode = Literal["off", "local", "keyed", "explicit"]

# What else the engine reads from disk besides the model, each staged like the model (stage/).
AssetKind = Literal["model", "lora", "draft", "quantized_checkpoint", "chat_template"]
# How staging makes an asset's `local` path exist: "s3" = copy an s3:// prefix (or one object for a
# file asset); "archive" = download/extract a .tar.gz (local or s3://); "local" = use a path on this
# host in place; "hub" = download a Hugging Face id (HF_TOKEN from the environment, never logged).
AssetFetch = Literal["s3", "archive", "local", "hub"]


@dataclass(frozen=True)
class ModelSpec:
    """The model the engine serves and where it will read it from once staged."""

    source: ModelSourceKind
    uri: str  # as the user gave it: s3://..., a hub id, a path, a .tar.gz
    local_path: str | None  # directory the engine reads; None only for "hub" left to the engine
    revision: str | None = None
    origin: str = ""  # the setting that chose it, e.g. "SM_VLLM_MODEL" (for logs and errors)


@dataclass(frozen=True)
class AssetSpec:
    """One thing the engine reads from disk, named by the user (`source`) and read by the engine at
    `local`: the plan decides `local` (pure), staging makes it exist with the model's stager (manifest,
    resume, safety checks), and argv / override_neuron_config name only `local`."""

    kind: AssetKind
    source: str  # as given: s3://..., a local path, a .tar.gz, a hub id
    local: str  # the path the engine reads
    fetch: AssetFetch
    name: str | None = None  # a LoRA adapter's name (what requests select it by); None otherwise
    origin: str = ""  # the setting that named it, e.g. "SM_VLLM_LORA_MODULES" (for logs and errors)
    is_file: bool = False  # a single file (a chat template), not a directory
    revision: str | None = None  # hub assets only

    def as_json(self) -> dict[str, Any]:
        """The `plan --json` entry: {"kind", "source", "local"} (and "name" for an adapter)."""
        doc: dict[str, Any] = {"kind": self.kind, "source": self.source, "local": self.local}
        if self.name is not None:
            doc["name"] = self.name
        return doc


# Request capabilities (RequestSupport fields) the front may refuse a request for needing.
CAPABILITIES = ("logprobs", "prompt_logprobs", "penalties", "structured_outputs")


@dataclass(frozen=True)
class RequestSupport:
    """What a request may ask of the planned engine, computed by the plan from the plugin's source for
    the planned sampling mode; the front refuses a request that needs a capability that is False (on
    the CPU device everything stays allowed).

    `why` maps each False capability to the sentence the refusal ends with: the setting that turns it
    on, or that the plugin cannot. `lora_adapters` are the adapter names requests select with the
    OpenAI `model` field or TGI's `adapter_id`; `adapter_required`: a request naming none is refused
    (vllm-neuron 0.2.2+lts reads `lora_request.lora_name` of every request when LoRA is on).
    """

    logprobs: bool = True
    prompt_logprobs: bool = True
    penalties: bool = True
    structured_outputs: bool = True
    lora_adapters: tuple[str, ...] = ()
    adapter_required: bool = False
    why: dict[str, str] = field(default_factory=dict)

    def allows(self, capability: str) -> bool:
        return bool(getattr(self, capability))

    def as_json(self) -> dict[str, Any]:
        """The `plan --json` "request_support" object."""
        doc: dict[str, Any] = {c: self.allows(c) for c in CAPABILITIES}
        doc["lora_adapters"] = list(self.lora_adapters)
        doc["adapter_required"] = self.adapter_required
        doc["why"] = dict(self.why)
        return doc


@dataclass(frozen=True)
class ArtifactSpec:
    """Where compiled Neuron artifacts live locally and (optionally) remotely."""

    mode: ArtifactMode = "off"
    local_dir: str | None = None  # the NEURON_COMPILED_ARTIFACTS the engine sees
    remote_uri: str | None = None  # s3://.../<cache_key>/ for "keyed", the user's URI for "explicit"
    read_only: bool = False  # never write back (NEURONSERVE_CACHE_READ_ONLY)
    # local_dir is neuronserve's own (<work_dir>/artifacts/<key>), not a directory the user named:
    # staging may clear it when it holds an unfinished compile.
    owned: bool = False
    # NEURONSERVE_REQUIRE_CACHE_HIT: a miss fails the start at once instead of letting the engine compile.
    require_hit: bool = False


@dataclass(frozen=True)
class ReplicaSpec:
    """One engine of a data-parallel plan: its own command, environment, cores and port."""

    index: int
    argv: tuple[str, ...]
    env: dict[str, str]
    cores: str  # NeuronCores (Neuron plan) or CPU ids (CPU plan) this replica owns, e.g. "4-7"
    port: int


class Integration(StrEnum):
    """How the engine reaches its device (LaunchPlan.integration). A StrEnum: `plan --json`, the text
    output and the cache key's graph write the value itself, as when it was a bare string."""

    PLUGIN = "plugin"  # vllm-neuron 0.2.x / 0.4.x on NxD Inference (lanes 2.27, 2.28)
    IN_TREE = "in-tree"  # vLLM 0.9/0.10's own `--device neuron`
    NATIVE = "native"  # the rewritten vllm-neuron 0.24 (lane 2.32), no NxD Inference
    CPU = "cpu"  # vLLM's CPU engine


@dataclass(frozen=True)
class LaunchPlan:
    """Everything needed to start the engine, computed without I/O from settings + host facts."""

    device: Device
    argv: tuple[str, ...]  # the full engine command, argv[0] is the Python executable
    env: dict[str, str]  # variables neuronserve sets for the engine (added to the inherited env)
    model: ModelSpec
    neuron_override: dict[str, Any] | None
    cache_key: str | None
    warnings: tuple[str, ...]
    engine_host: str = "127.0.0.1"
    engine_port: int = 8081
    artifacts: ArtifactSpec = field(default_factory=ArtifactSpec)
    serve: ServeOptions = field(default_factory=ServeOptions)
    work_dir: str = "/tmp/neuronserve"  # writable scratch: staged model, artifacts, engine CWD
    integration: Integration = Integration.PLUGIN
    # HBM estimate per NeuronCore (plan/fit/memory.py as_json); None on CPU or when it could not be made.
    memory: dict[str, Any] | None = None
    instance: dict[str, Any] | None = None  # the instance facts it was checked against
    # Speed estimate (plan/fit/estimate.py SpeedEstimate.as_json): TTFT, TPOT, tokens/s and its band;
    # None on CPU or without a memory estimate.
    estimate: dict[str, Any] | None = None
    # One entry per data-parallel replica (build_plan makes at least one); argv/env/engine_port above
    # describe replica 0.
    replicas: tuple[ReplicaSpec, ...] = ()
    # Everything the engine reads from disk, the model first (AssetSpec); staging fetches each.
    assets: tuple[AssetSpec, ...] = ()
    # Files the plan decides in full and staging writes once the assets are local (path -> text),
    # e.g. the plugin's lora_ckpt_json adapter list, which names the staged adapter paths.
    files: dict[str, str] = field(default_factory=dict)
    # What requests may ask for (the front refuses what the engine would silently ignore).
    request_support: RequestSupport = field(default_factory=RequestSupport)
    # The stack lane planned for (plan/lanes/lane.py Lane.stack_json): {"lane", "sdk", "vllm_neuron", "vllm"},
    # and on the NxD Inference lanes "nxd_inference": the model registry the plan checked the model against
    # ({"version", "source": "installed" | "assumed", "model_types"}, plan/lanes/nxdi/models.py).
    stack: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Progress:
    """Staging progress, logged every few seconds and shown in the /ping body while STAGING."""

    what: str  # e.g. "model s3://bucket/llama/" or "artifacts <cache_key>"
    done_bytes: int
    total_bytes: int | None
    rate_bps: float
    eta_s: float | None

    @property
    def percent(self) -> float | None:
        if not self.total_bytes:
            return None
        return 100.0 * self.done_bytes / self.total_bytes


@dataclass(frozen=True)
class StageResult:
    """Where staging put things; the engine is started only after this exists."""

    model_dir: str | None  # None only for a hub id left to the engine
    artifacts_dir: str | None
    cache: Literal["hit", "miss", "off"]
