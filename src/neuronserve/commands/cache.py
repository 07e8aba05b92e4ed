"""`neuronserve cache push DIR [--key KEY]`: publish artifacts compiled ahead of time to the cache.

On a build machine: compile once, push under the plan's cache key (or an explicit --key), and every
endpoint with the same configuration starts with a cache hit. Top-level imports stay stdlib only.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from neuronserve.errors import ConfigError


def add_arguments(sub: Any) -> None:
    p = sub.add_parser("cache", help="manage the compiled-artifact cache (NEURONSERVE_CACHE_URI)")
    csub = p.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    push = csub.add_parser("push", help="publish a directory of compiled artifacts under a cache key")
    push.add_argument(
        "dir",
        metavar="DIR",
        help="the compiled artifacts directory (lane 2.32: $VLLM_CACHE_ROOT/neuron/compile_cache; "
        "lane 2.33: $VLLM_CACHE_ROOT)",
    )
    push.add_argument("--key", default=None, help="cache key to publish under (default: the plan's key)")
    push.add_argument("--device", choices=["neuron", "cpu"], default=None, help="plan for this device")
    push.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace, environ: dict[str, str]) -> int:
    from neuronserve.config.table import VARS  # noqa: PLC0415 (keeps `cache --help` light)

    cache_uri = VARS["NEURONSERVE_CACHE_URI"].read(environ) or ""
    if not cache_uri:
        raise ConfigError(
            "`cache push` needs NEURONSERVE_CACHE_URI (an s3://bucket/prefix/ for the compile cache)",
            ("NEURONSERVE_CACHE_URI",),
        )
    if not cache_uri.startswith("s3://"):
        raise ConfigError(
            f"NEURONSERVE_CACHE_URI={cache_uri!r} must be an s3:// URI", ("NEURONSERVE_CACHE_URI",)
        )
    key = args.key
    whole_root = _lane_keys_the_root(VARS["NEURONSERVE_STACK"].read(environ), _installed_plugin())
    if not key:
        from neuronserve.launchplan import resolve_plan  # noqa: PLC0415

        plan = resolve_plan(environ, device=args.device, extra_args=getattr(args, "extra_args", ()))
        key = plan.cache_key
        if not key:
            raise ConfigError(
                "the plan has no cache key for this configuration (CPU plans have none): pass --key KEY",
                ("NEURONSERVE_CACHE_URI",),
            )
        whole_root = _lane_keys_the_root(plan.stack.get("lane"), None)
    if whole_root:
        _refuse_a_compile_cache_alone(args.dir)
    else:
        _refuse_a_cache_root(args.dir)
    if "/" in key or key in (".", ".."):
        raise ConfigError(f"cache key {key!r} must be a single path segment", ("NEURONSERVE_CACHE_URI",))
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s"
        )
    from neuronserve.stage.client import make_client  # noqa: PLC0415
    from neuronserve.stage.paths import parse_s3_uri  # noqa: PLC0415
    from neuronserve.stage.transfer import options_from  # noqa: PLC0415
    from neuronserve.stage.upload import publish_dir  # noqa: PLC0415

    remote = parse_s3_uri(cache_uri.rstrip("/") + f"/{key}/")
    opts = options_from(environ)
    manifest = publish_dir(make_client(environ, pool=opts.concurrency + 4), args.dir, remote, opts)
    if args.json:
        print(
            json.dumps(
                {"uri": remote.uri, "key": key, "upload_id": manifest.upload_id, "files": len(manifest.files)}
            )
        )
    else:
        print(f"published {len(manifest.files)} files to {remote.uri} (upload {manifest.upload_id})")
    return 0


# Where vllm-neuron 0.24 (lane 2.32) compiles under VLLM_CACHE_ROOT (plan/lanes/native/cache.py's
# COMPILE_CACHE_SUBDIR; not imported: this module's top-level imports stay stdlib only).
COMPILE_CACHE_SUBDIR = "neuron/compile_cache"
# The lanes whose keyed entry is the whole VLLM_CACHE_ROOT (plan/lanes/native/rules.py, keyed_subdir ""),
# and the installed plugin series that mean them; tests/unit/commands/test_cache_layout.py holds these
# to the registry.
WHOLE_ROOT_LANES = {"2.33": "0.29"}


def _installed_plugin() -> str | None:
    from importlib import metadata  # noqa: PLC0415

    try:
        return metadata.version("vllm-neuron")
    except metadata.PackageNotFoundError:
        return None


def _lane_keys_the_root(lane: str | None, plugin: str | None) -> bool:
    """Whether the lane (the plan's, else NEURONSERVE_STACK, else the installed plugin's) keys the whole
    VLLM_CACHE_ROOT: lane 2.33, whose precompile cache lies beside neuron/compile_cache."""
    if lane:
        return lane.strip() in WHOLE_ROOT_LANES
    series = ".".join((plugin or "").split("+")[0].split(".")[:2])
    return bool(plugin) and series in WHOLE_ROOT_LANES.values()


def _refuse_a_compile_cache_alone(directory: str) -> None:
    """A lane 2.33 entry is the whole VLLM_CACHE_ROOT (the plugin's compile cache and the native route's
    precompile cache): pushing its neuron/compile_cache alone would publish entries one level too high
    and leave the precompile cache out, so every later start would miss; refused naming the root."""
    from pathlib import Path  # noqa: PLC0415

    path = Path(directory).resolve()
    if path.as_posix().endswith("/" + COMPILE_CACHE_SUBDIR):
        root = path.parent.parent
        raise ConfigError(
            f"{directory} is a {COMPILE_CACHE_SUBDIR} directory: in lane 2.33 the cache entry is the whole "
            f"VLLM_CACHE_ROOT (the compile cache and the precompile cache): push {root} instead",
            ("NEURONSERVE_CACHE_URI",),
        )


def _refuse_a_cache_root(directory: str) -> None:
    """A lane 2.32 entry is the compile-cache directory's content (the `<hash>/` entries): the stage
    fetches it INTO `$VLLM_CACHE_ROOT/neuron/compile_cache`. Pushing VLLM_CACHE_ROOT itself would publish
    `neuron/compile_cache/<hash>/` one level too deep, and every later start would miss (or fail under
    NEURONSERVE_REQUIRE_CACHE_HIT) without saying why; so it is refused naming the directory to push."""
    from pathlib import Path  # noqa: PLC0415

    nested = Path(directory) / COMPILE_CACHE_SUBDIR
    if nested.is_dir():
        raise ConfigError(
            f"{directory} holds {COMPILE_CACHE_SUBDIR}/: it is a VLLM_CACHE_ROOT (lane 2.32), whose "
            f"entries the stage fetches into {COMPILE_CACHE_SUBDIR}: push {nested} instead",
            ("NEURONSERVE_CACHE_URI",),
        )
