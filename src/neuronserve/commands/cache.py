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
        help="the compiled artifacts directory (lane 2.32: $VLLM_CACHE_ROOT/neuron/compile_cache)",
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
    if not key:
        from neuronserve.launchplan import resolve_plan  # noqa: PLC0415

        plan = resolve_plan(environ, device=args.device, extra_args=getattr(args, "extra_args", ()))
        key = plan.cache_key
        if not key:
            raise ConfigError(
                "the plan has no cache key for this configuration (CPU plans have none): pass --key KEY",
                ("NEURONSERVE_CACHE_URI",),
            )
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
