"""One s5cmd download run, driven from our checked listing: the wildcard copy of a prefix (or one `cp`
line per key), the journal entry of each file it reports, progress from the bytes on disk, and the
refusal of any file the listing did not have (SAFETY_EXCLUDES, `_unexpected`).

s3engine.py chooses the engine and lists; this module runs the copy; s5cmdproc.py starts the process.
s5cmd retries throttling and dropped connections with backoff itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from neuronserve.errors import StageError
from neuronserve.stage.client import disk_full, is_disk_full_text
from neuronserve.stage.context import Batch, StageContext
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.s5cmdproc import S5Run, first_error, global_args
from neuronserve.stage.transfer import Journal, RemoteObject, size_of

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


def _base_argv(binary: str, ctx: StageContext) -> list[str]:
    argv = global_args(binary, ctx.endpoint, retries=10)  # info level: one JSON line per finished copy
    if ctx.transfer.numworkers is not None:  # else s5cmd's own default (measured best)
        argv += ["--numworkers", str(ctx.transfer.numworkers)]
    return argv


def start_prefix_copy(
    binary: str, ctx: StageContext, bucket: str, prefix: str, staging_dir: str, *, resume: bool = False
) -> S5Run:
    """One wildcard copy of `s3://bucket/prefix*` into the staging dir (s5cmd lists it itself).

    It runs after our listing was checked; SAFETY_EXCLUDES keep whatever s5cmd's own listing adds
    in the meantime from escaping, and `_Copy.collect` refuses what our listing did not have.
    """
    excludes = [arg for pattern in SAFETY_EXCLUDES for arg in ("--exclude", pattern)]
    resume_flag = ["--if-size-differ"] if resume else []  # costs a stat per file: only when resuming
    argv = [
        *_base_argv(binary, ctx),
        "cp",
        *resume_flag,
        *excludes,
        f"s3://{bucket}/{prefix}*",
        staging_dir.rstrip("/") + "/",
    ]
    run = S5Run(argv, ctx.s5cmd_env)
    run.prefix = prefix
    return run


def download_with_s5cmd(binary: str, ctx: StageContext, batch: Batch) -> int:
    """Fetch the objects not yet journaled; returns how many were fetched. Same journal as the Python engine.

    `batch.whole_prefix` says the objects are everything under their common prefix (a listing), so one
    wildcard copy fetches exactly them; otherwise each key gets its own `cp` line. Whatever the
    wildcard copy did not bring (a key it excluded, one added after its listing) is
    fetched by a second, per-key pass.

    Files not in the journal are deleted first, so what s5cmd skips (`--if-size-differ`) is exactly
    the set of files a previous run finished; s5cmd writes each file to a temporary name and renames
    it when complete, so a final name in the staging dir never holds a partial file.

    `batch.early` is a wildcard copy `s3engine.start_early_copy` began into a fresh staging dir while
    the listing ran: it is adopted when it copies exactly these objects' prefix, else stopped and its
    files removed before anything else is fetched.
    """
    prefix = common_prefix(batch.objects) if batch.whole_prefix else None
    early = batch.early
    if early is not None and (prefix is None or early.prefix != prefix):
        early.abandon(batch.staging_dir, keep_dir=True)
        early = None
    copy = _Copy(binary, ctx, batch, Journal(batch.staging_dir))
    finished = copy.journal.load()
    todo: dict[str, RemoteObject] = {}
    for obj in batch.objects:
        path = os.path.abspath(os.path.join(batch.staging_dir, obj.rel))
        if finished.get(obj.rel) == (obj.size, obj.etag) and size_of(path) == obj.size:
            copy.base += obj.size
        else:
            todo[path] = obj
            if early is None:  # a fresh dir holds nothing stale; the early copy's files are not
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
    batch.meter.add(copy.base)
    if not todo:
        return 0
    if prefix is None:
        return copy.per_key(todo)
    # one listing-driven copy: no per-key HEAD request
    run = early or start_prefix_copy(
        binary, ctx, batch.bucket, prefix, batch.staging_dir, resume=bool(copy.base)
    )
    landed = copy.collect(run, todo)
    left = {dest: obj for dest, obj in todo.items() if dest not in landed}
    if left:  # excluded by SAFETY_EXCLUDES, or added after s5cmd's own listing
        log.info("fetching %d object(s) the wildcard copy skipped, one key at a time", len(left))
        copy.per_key(left)
    batch.meter.set(copy.base + sum(o.size for o in todo.values()))
    return len(todo)


@dataclass
class _Copy:
    """One s5cmd download of a batch: its journal, and the bytes a previous run already finished."""

    binary: str
    ctx: StageContext
    batch: Batch
    journal: Journal
    base: int = 0

    def per_key(self, todo: dict[str, RemoteObject]) -> int:
        """One `cp --raw` line per object through `s5cmd run` (s5cmd HEADs each: slower, but exact).

        `--raw` makes s5cmd take the key as it is: without it a key with `*`, `?` or `[` (legal in
        S3, and passed by our listing) is expanded as a wildcard, so it copies other keys onto this
        one's path or fails, and a destination with those characters is refused outright.
        """
        bucket = self.batch.bucket
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
        run = S5Run([*_base_argv(self.binary, self.ctx), "run"], self.ctx.s5cmd_env, lines)
        landed = self.collect(run, todo)
        if len(landed) != len(todo):
            raise StageError(
                f"s5cmd reported {len(landed)} of {len(todo)} files from s3://{bucket}/ as copied; re-run"
            )
        return len(todo)

    def collect(self, run: S5Run, todo: dict[str, RemoteObject]) -> set[str]:
        """Journal each object s5cmd reports as copied; fail on its error or on a file we did not list."""
        bucket, staging_dir, verify = self.batch.bucket, self.batch.staging_dir, self.batch.verify
        landed: set[str] = set()
        # Files a previous run finished: s5cmd's --if-size-differ still re-copies some (an empty file
        # after a failed run did); a fresh whole copy of a listed object is not a stranger.
        finished = {os.path.abspath(os.path.join(staging_dir, rel)) for rel in self.journal.load()}
        stop = threading.Event()
        poller = threading.Thread(
            target=_poll_sizes, args=(staging_dir, self.batch.meter, self.base, stop), daemon=True
        )
        poller.start()
        try:
            for event in run.events():
                if not event.get("success"):
                    continue
                dest = os.path.abspath(str(event.get("destination", "")))
                if dest not in todo:
                    if dest in finished:
                        continue
                    # the prefix changed after our listing
                    _unexpected(run.proc, bucket, event, dest, staging_dir)
                obj = todo[dest]
                if size_of(dest) != obj.size:
                    raise StageError(f"s3://{bucket}/{obj.key}: size changed during download; re-run")
                if verify is not None:
                    verify(obj, dest)
                self.journal.record(obj)
                landed.add(dest)
            rc = run.wait()
        finally:
            stop.set()
            run.kill()
        if rc != 0:
            _failed(run, bucket, todo)
        return landed


def _failed(run: S5Run, bucket: str, todo: dict[str, RemoteObject]) -> NoReturn:
    """s5cmd exited non-zero: a full disk in the user's terms, else s5cmd's first error."""
    message = first_error(run.errors)
    if is_disk_full_text(message):
        dirs = os.path.commonpath([o.key.rsplit("/", 1)[0] if "/" in o.key else "" for o in todo.values()])
        raise disk_full(f"s3://{bucket}/{dirs + '/' if dirs else ''}", message)
    raise StageError(f"s5cmd failed downloading from s3://{bucket}/: {message}")


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
                total += max(size_of(os.path.join(root, name)), 0)
        meter.set(max(total, base))
