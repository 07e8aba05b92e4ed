"""One s5cmd download run, driven from our checked listing: the wildcard copy of a prefix (or one `cp`
line per key), the journal entry of each file it reports, progress from the bytes on disk, and the
refusal of any file the listing did not have (SAFETY_EXCLUDES, `_unexpected`).

stage/s5.py chooses the engine and lists; this module runs the copy. s5cmd retries throttling and
dropped connections with backoff itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from neuronserve.errors import StageError
from neuronserve.stage.client import disk_full, is_disk_full_text
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.s5proc import S5Run, first_error, global_args
from neuronserve.stage.transfer import Journal, RemoteObject, TransferOptions

log = logging.getLogger("neuronserve.stage")


def unquotable(text: str) -> bool:
    return any(c in text for c in '"\\\n\r')


def common_prefix(objects: Sequence[RemoteObject]) -> str | None:
    """The prefix P with key == P + rel for every object (then one wildcard `cp P*` maps keys exactly)."""
    prefixes = {o.key[: len(o.key) - len(o.rel)] for o in objects if o.key.endswith(o.rel)}
    if len(prefixes) != 1 or any(not o.key.endswith(o.rel) for o in objects):
        return None
    prefix = prefixes.pop()
    return None if any(c in prefix for c in "*?[]{}") else prefix


SAFETY_EXCLUDES = ("*..*", "*.neuronserve-*")
"""Patterns every wildcard copy skips, whatever our listing said.

s5cmd v2.3.0 joins `..` keys onto its destination and writes outside it (seen in our tests), and
it lists the prefix again for a wildcard copy, so a key added after our checked listing would
reach it unchecked. With these excludes it can never write a `..` key or one of our bookkeeping
names (a superset: a safe key such as `a..b` is skipped too and fetched by the per-key pass).
"""


def _base_argv(binary: str, environ: Mapping[str, str], opts: TransferOptions) -> list[str]:
    argv = global_args(binary, environ, retries=10)  # info level: one JSON line per finished copy
    if environ.get("NEURONSERVE_S3_CONCURRENCY"):  # else s5cmd's own default (measured best)
        argv += ["--numworkers", str(opts.concurrency)]
    return argv


def start_prefix_copy(  # noqa: PLR0917
    binary: str,
    environ: Mapping[str, str],
    bucket: str,
    prefix: str,
    staging_dir: str,
    opts: TransferOptions,
    *,
    resume: bool = False,
) -> S5Run:
    """One wildcard copy of `s3://bucket/prefix*` into the staging dir (s5cmd lists it itself).

    It runs after our listing was checked; SAFETY_EXCLUDES keep whatever s5cmd's own listing adds
    in the meantime from escaping, and `_collect` refuses what our listing did not have.
    """
    excludes = [arg for pattern in SAFETY_EXCLUDES for arg in ("--exclude", pattern)]
    resume_flag = ["--if-size-differ"] if resume else []  # costs a stat per file: only when resuming
    argv = [
        *_base_argv(binary, environ, opts),
        "cp",
        *resume_flag,
        *excludes,
        f"s3://{bucket}/{prefix}*",
        staging_dir.rstrip("/") + "/",
    ]
    run = S5Run(argv, environ)
    run.prefix = prefix
    return run


def download_with_s5cmd(  # noqa: PLR0917
    binary: str,
    environ: Mapping[str, str],
    bucket: str,
    objects: Sequence[RemoteObject],
    staging_dir: str,
    opts: TransferOptions,
    meter: ProgressMeter,
    verify: Callable[[RemoteObject, str], None] | None = None,
    *,
    whole_prefix: bool = False,
    early: S5Run | None = None,
) -> int:
    """Fetch the objects not yet journaled; returns how many were fetched. Same journal as the Python engine.

    `whole_prefix` says the objects are everything under their common prefix (a listing), so one
    wildcard copy fetches exactly them; otherwise each key gets its own `cp` line. Whatever the
    wildcard copy did not bring (a key it excluded, one added after its listing) is
    fetched by a second, per-key pass.

    Files not in the journal are deleted first, so what s5cmd skips (`--if-size-differ`) is exactly
    the set of files a previous run finished; s5cmd writes each file to a temporary name and renames
    it when complete, so a final name in the staging dir never holds a partial file.

    `early` is a wildcard copy `start_early_copy` began into a fresh staging dir while the listing
    ran: it is adopted when it copies exactly these objects' prefix, else stopped and its files
    removed before anything else is fetched.
    """
    prefix = common_prefix(objects) if whole_prefix else None
    if early is not None and (prefix is None or early.prefix != prefix):
        early.abandon(staging_dir, keep_dir=True)
        early = None
    journal = Journal(staging_dir)
    finished = journal.load()
    todo: dict[str, RemoteObject] = {}
    base = 0
    for obj in objects:
        path = os.path.abspath(os.path.join(staging_dir, obj.rel))
        if finished.get(obj.rel) == (obj.size, obj.etag) and _size(path) == obj.size:
            base += obj.size
        else:
            todo[path] = obj
            if early is None:  # a fresh dir holds nothing stale; the early copy's files are not
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
    meter.add(base)
    if not todo:
        return 0
    if prefix is None:
        return _per_key(binary, environ, bucket, todo, staging_dir, opts, meter, verify, journal, base)
    # one listing-driven copy: no per-key HEAD request
    run = early or start_prefix_copy(binary, environ, bucket, prefix, staging_dir, opts, resume=bool(base))
    landed = _collect(run, bucket, todo, staging_dir, meter, base, verify, journal)
    left = {dest: obj for dest, obj in todo.items() if dest not in landed}
    if left:  # excluded by SAFETY_EXCLUDES, or added after s5cmd's own listing
        log.info("fetching %d object(s) the wildcard copy skipped, one key at a time", len(left))
        _per_key(binary, environ, bucket, left, staging_dir, opts, meter, verify, journal, base)
    meter.set(base + sum(o.size for o in todo.values()))
    return len(todo)


def _per_key(  # noqa: PLR0917
    binary: str,
    environ: Mapping[str, str],
    bucket: str,
    todo: dict[str, RemoteObject],
    staging_dir: str,
    opts: TransferOptions,
    meter: ProgressMeter,
    verify: Callable[[RemoteObject, str], None] | None,
    journal: Journal,
    base: int,
) -> int:
    """One `cp --raw` line per object through `s5cmd run` (s5cmd HEADs each: slower, but exact).

    `--raw` makes s5cmd take the key as it is: without it a key with `*`, `?` or `[` (legal in S3,
    and passed by our listing) is expanded as a wildcard, so it copies other keys onto this one's
    path or fails, and a destination with those characters is refused outright.
    """
    bad = [o.key for o in todo.values() if unquotable(o.key)]
    if bad:
        raise StageError(
            f"s3://{bucket}/{bad[0]}: the key has quotes, backslashes or newlines, which s5cmd cannot "
            "take one key at a time; set NEURONSERVE_S3_ENGINE=python"
        )
    lines = ""
    for dest, obj in todo.items():
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        lines += f'cp --raw "s3://{bucket}/{obj.key}" "{dest}"\n'
    run = S5Run([*_base_argv(binary, environ, opts), "run"], environ, lines)
    landed = _collect(run, bucket, todo, staging_dir, meter, base, verify, journal)
    if len(landed) != len(todo):
        raise StageError(
            f"s5cmd reported {len(landed)} of {len(todo)} files from s3://{bucket}/ as copied; re-run"
        )
    return len(todo)


def _collect(  # noqa: PLR0917
    run: S5Run,
    bucket: str,
    todo: dict[str, RemoteObject],
    staging_dir: str,
    meter: ProgressMeter,
    base: int,
    verify: Callable[[RemoteObject, str], None] | None,
    journal: Journal,
) -> set[str]:
    """Journal each object s5cmd reports as copied; fail on its error or on a file we did not list."""
    landed: set[str] = set()
    # Files a previous run finished: s5cmd's --if-size-differ still re-copies some (an empty file
    # after a failed run did); a fresh whole copy of a listed object is not a stranger.
    finished = {os.path.abspath(os.path.join(staging_dir, rel)) for rel in journal.load()}
    stop = threading.Event()
    poller = threading.Thread(target=_poll_sizes, args=(staging_dir, meter, base, stop), daemon=True)
    poller.start()
    try:
        for event in run.events():
            if not event.get("success"):
                continue
            dest = os.path.abspath(str(event.get("destination", "")))
            if dest not in todo:
                if dest in finished:
                    continue
                _unexpected(
                    run.proc, bucket, event, dest, staging_dir
                )  # the prefix changed after our listing
            obj = todo[dest]
            if _size(dest) != obj.size:
                raise StageError(f"s3://{bucket}/{obj.key}: size changed during download; re-run")
            if verify is not None:
                verify(obj, dest)
            journal.record(obj)
            landed.add(dest)
        rc = run.wait()
    finally:
        stop.set()
        run.kill()
    if rc != 0:
        message = first_error(run.errors)
        if is_disk_full_text(message):
            dirs = os.path.commonpath(
                [o.key.rsplit("/", 1)[0] if "/" in o.key else "" for o in todo.values()]
            )
            raise disk_full(f"s3://{bucket}/{dirs + '/' if dirs else ''}", message)
        raise StageError(f"s5cmd failed downloading from s3://{bucket}/: {message}")
    return landed


def _unexpected(
    proc: subprocess.Popen[str], bucket: str, event: Mapping[str, object], dest: str, staging_dir: str
) -> NoReturn:
    """s5cmd copied an object our listing did not have: kill it and fail, naming the key.

    s5cmd's wildcard copy lists the prefix again, and it does not refuse `..` in keys (it wrote
    such keys outside its destination in our test), so an object added between our checked
    listing and its own is never trusted. Inside the staging directory the stray file is removed;
    outside it, the path is named so an operator can look.
    """
    proc.kill()
    source = str(event.get("source", "")) or f"s3://{bucket}/?"
    inside = os.path.commonpath([dest, os.path.abspath(staging_dir)]) == os.path.abspath(staging_dir)
    if inside:
        with contextlib.suppress(OSError):
            os.unlink(dest)
        raise StageError(
            f"{source}: appeared under the prefix after it was listed (is something writing to it?); "
            "staging stopped, re-run once the prefix is stable"
        )
    raise StageError(
        f"{source}: appeared after the listing and s5cmd wrote it OUTSIDE the staging directory, at "
        f"{dest}; staging stopped. Someone is writing keys with '..' to this prefix: check the bucket"
    )


def _poll_sizes(staging_dir: str, meter: ProgressMeter, base: int, stop: threading.Event) -> None:
    """Progress while s5cmd writes: bytes on disk in the staging dir (its temp files included)."""
    while not stop.wait(1.0):
        total = 0
        for root, _dirs, files in os.walk(staging_dir):
            for name in files:
                total += _size(os.path.join(root, name))
        meter.set(max(total, base))


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1
