"""Where one asset is staged and how it is fetched (pure): the shared step of plan/assets/kinds.py and
plan/assets/lora.py, and `Staged`, what a plan's assets change in the launch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuronserve.errors import ConfigError
from neuronserve.plan.facts import HostFacts
from neuronserve.types import AssetKind, AssetSpec

ARCHIVES = (".tar.gz", ".tgz")


def assets_dir(work_dir: str) -> str:
    return f"{work_dir.rstrip('/')}/assets"


def locate(
    kind: AssetKind,
    source: str,
    staged: str,
    origin: str,
    facts: HostFacts,
    *,
    name: str | None = None,
    is_file: bool = False,
    hub: bool = True,
) -> AssetSpec | None:
    """Where staging puts `source` and how it fetches it (`staged`: the local target for a remote
    source). A local path is used in place and must exist on this host as what the kind needs; an
    archive is extracted into `staged`; an s3:// file lands as `staged/<its name>`. A source that is
    none of these is a hub id: staged to `staged` when `hub`, else None (left to the engine)."""
    found = facts.paths.get(source)
    want = "file" if is_file else "directory"
    if source.endswith(ARCHIVES) and not is_file:
        if not source.startswith("s3://") and (found is None or found.kind != "file"):
            raise ConfigError(f"{origin}={source}: no such archive on this host", (origin,))
        return AssetSpec(kind, source, staged, "archive", name, origin, is_file)
    if source.startswith("s3://"):
        if not source[len("s3://") :].partition("/")[0]:
            raise ConfigError(f"{origin}={source}: no bucket name: give s3://bucket/prefix/", (origin,))
        base = source.rstrip("/").rsplit("/", 1)[-1]
        if is_file and (source.endswith("/") or not base or base.startswith("s3:")):
            raise ConfigError(f"{origin}={source}: name one s3:// object (the {kind} file)", (origin,))
        return AssetSpec(kind, source, f"{staged}/{base}" if is_file else staged, "s3", name, origin, is_file)
    if found is not None and found.kind == ("file" if is_file else "dir"):
        if not source.startswith("/"):
            raise ConfigError(
                f"{origin}={source}: give the absolute path (the engine runs in NEURONSERVE_WORK_DIR, "
                "where a relative path names something else)",
                (origin,),
            )
        return AssetSpec(kind, source, source, "local", name, origin, is_file)
    if source.startswith(("/", ".", "~")) or (found is not None and found.kind in ("file", "dir")):
        raise ConfigError(
            f"{origin}={source}: no such {want} on this host (a {kind} is an s3:// URI, a local {want}"
            + (" or a .tar.gz)" if not is_file else ")"),
            (origin,),
        )
    if not hub:
        return None
    return AssetSpec(kind, source, staged, "hub", name, origin, is_file)


@dataclass
class Staged:
    """The assets a plan stages and what naming their local paths changes in the launch.

    - `assets`: the model first, then the others in a fixed order (adapters, draft, checkpoint,
      template).
    - `flags`: engine argv tokens the plan renders itself with local paths (`--lora-modules`,
      `--speculative-config`, `--chat-template`); `skip`: the settings they replace, never passed
      through as given.
    - `override`: override_neuron_config keys naming local paths (Neuron only), each with the variable
      that named the asset (`origins`).
    - `files`: files the stager writes once assets are local (path -> text).
    - `graph`: what the assets change in the compiled graph, merged into the graph the cache key hashes
      (plan/assets/kinds.py keyed_graph): the LoRA shapes (plan/assets/lora.py lora_graph).
    """

    assets: list[AssetSpec] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    skip: set[str] = field(default_factory=set)
    override: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    graph: dict[str, Any] = field(default_factory=dict)
