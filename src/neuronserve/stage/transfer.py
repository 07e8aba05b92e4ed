"""The download engine: list a prefix, then fetch every object with parallel ranged GETs.

Design (measured against s5cmd, see docs/PERFORMANCE.md): one thread pool of `concurrency` workers
over a queue of byte ranges. Large objects are split into `part_size` ranges written in place with
`os.pwrite` into a pre-sized `<name>.neuronserve-part` file, so memory stays at workers x chunk no
matter how big the model. A dropped connection resumes the range from the last byte written, with
backoff; throttling (503 SlowDown) is retried by botocore's adaptive mode first, then here. A finished
file is renamed to its final name and recorded in a journal, so a killed run resumes file by file.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from neuronserve.errors import StageError
from neuronserve.stage.client import translate
from neuronserve.stage.paths import JOURNAL_NAME, PART_SUFFIX, S3Uri, check_no_conflicts, key_to_relpath
from neuronserve.stage.progress import MIB, ProgressMeter

log = logging.getLogger("neuronserve.stage")


@dataclass(frozen=True)
class RemoteObject:
    key: str
    rel: str
    size: int
    etag: str


@dataclass(frozen=True)
class TransferOptions:
    concurrency: int = 16
    part_size: int = 16 * MIB
    chunk: int = 1 * MIB
    max_attempts: int = 6
    environ: Mapping[str, str] = field(default_factory=dict)  # engine choice, s5cmd's AWS settings


def options_from(environ: Mapping[str, str]) -> TransferOptions:
    """`NEURONSERVE_S3_CONCURRENCY` and `NEURONSERVE_S3_PART_MB` tune the engine (defaults measured)."""
    try:
        conc = int(environ.get("NEURONSERVE_S3_CONCURRENCY", "16"))
        part = int(environ.get("NEURONSERVE_S3_PART_MB", "16"))
    except ValueError as err:
        raise StageError(
            f"NEURONSERVE_S3_CONCURRENCY / NEURONSERVE_S3_PART_MB must be integers: {err}"
        ) from err
    return TransferOptions(concurrency=max(1, min(conc, 128)), part_size=max(1, part) * MIB, environ=environ)


def list_prefix(client: Any, src: S3Uri) -> list[RemoteObject]:
    """Every object under the prefix (directory markers skipped); empty prefix is an error naming the URI."""
    prefix = src.as_prefix()
    objects: list[RemoteObject] = []
    try:
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=prefix.bucket, Prefix=prefix.key):
            for item in page.get("Contents", []):
                rel = key_to_relpath(item["Key"], prefix.key)
                if rel is not None:
                    objects.append(RemoteObject(item["Key"], rel, int(item["Size"]), item["ETag"].strip('"')))
    except Exception as err:
        raise translate(err, prefix.uri) from err
    if not objects:
        raise StageError(
            f"no objects under {prefix.uri}: the prefix is empty or misspelled; "
            "list it with `aws s3 ls` and check the path (a model directory needs its trailing '/')"
        )
    check_no_conflicts([o.rel for o in objects], where=prefix.uri)
    return objects


class Journal:
    """Append-only record of finished files inside the staging directory (resume without re-fetch)."""

    def __init__(self, staging_dir: str) -> None:
        self.path = os.path.join(staging_dir, JOURNAL_NAME)
        self._lock = threading.Lock()

    def load(self) -> dict[str, tuple[int, str]]:
        done: dict[str, tuple[int, str]] = {}
        try:
            with open(self.path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                        done[str(rec["rel"])] = (int(rec["size"]), str(rec["etag"]))
                    except (ValueError, KeyError, TypeError):
                        continue  # a torn last line from a killed run
        except FileNotFoundError:
            pass
        return done

    def record(self, obj: RemoteObject) -> None:
        line = json.dumps({"rel": obj.rel, "size": obj.size, "etag": obj.etag}) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)


class _FileState:
    """One object being written: opened lazily, closed and renamed when its last range lands."""

    def __init__(self, obj: RemoteObject, staging_dir: str, parts: int) -> None:
        self.obj = obj
        self.final = os.path.join(staging_dir, obj.rel)
        self.part = self.final + PART_SUFFIX
        self.remaining = parts
        self.fd: int | None = None
        self.lock = threading.Lock()

    def open(self) -> int:
        with self.lock:
            if self.fd is None:
                os.makedirs(os.path.dirname(self.final), exist_ok=True)
                self.fd = os.open(self.part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.ftruncate(self.fd, self.obj.size)
            return self.fd

    def part_done(self) -> bool:
        with self.lock:
            self.remaining -= 1
            if self.remaining > 0:
                return False
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
            return True


def _retryable(err: BaseException) -> bool:
    from botocore.exceptions import (  # noqa: PLC0415
        ClientError,
        HTTPClientError,
        IncompleteReadError,
        ReadTimeoutError,
        ResponseStreamingError,
    )
    from botocore.exceptions import ConnectionError as BotoConnError  # noqa: PLC0415

    if isinstance(err, ClientError):
        code = str(err.response.get("Error", {}).get("Code", ""))
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return code in ("SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable") or status >= 500
    retry_types = (
        BotoConnError,
        HTTPClientError,
        IncompleteReadError,
        ReadTimeoutError,
        ResponseStreamingError,
    )
    return isinstance(err, (*retry_types, ConnectionError, TimeoutError))


def download_objects(  # noqa: PLR0917
    client: Any,
    bucket: str,
    objects: Iterable[RemoteObject],
    staging_dir: str,
    opts: TransferOptions,
    meter: ProgressMeter,
    verify: Callable[[RemoteObject, str], None] | None = None,
) -> int:
    """Fetch the objects not yet journaled into `staging_dir`; returns how many were fetched."""
    journal = Journal(staging_dir)
    finished = journal.load()
    todo: list[RemoteObject] = []
    for obj in objects:
        path = os.path.join(staging_dir, obj.rel)
        if finished.get(obj.rel) == (obj.size, obj.etag) and _size_is(path, obj.size):
            meter.add(obj.size)
        else:
            todo.append(obj)
    _Download(client, bucket, staging_dir, opts, meter, verify, journal).run(todo)
    return len(todo)


@dataclass
class _Download:
    """One download of a list of objects: ranged GETs of each part on a thread pool, retried with
    backoff; the first failure cancels the rest and is raised."""

    client: Any
    bucket: str
    staging_dir: str
    opts: TransferOptions
    meter: ProgressMeter
    verify: Callable[[RemoteObject, str], None] | None
    journal: Journal
    cancel: threading.Event = field(default_factory=threading.Event)

    def run(self, todo: list[RemoteObject]) -> None:
        opts = self.opts
        with ThreadPoolExecutor(max_workers=opts.concurrency, thread_name_prefix="s3-get") as pool:
            futures = []
            for obj in todo:
                nparts = max(1, -(-obj.size // opts.part_size))
                state = _FileState(obj, self.staging_dir, nparts)
                if obj.size == 0:
                    state.open()
                    state.part_done()
                    self.finish(state)
                    continue
                for i in range(nparts):
                    start = i * opts.part_size
                    futures.append(
                        pool.submit(self.fetch, state, start, min(obj.size, start + opts.part_size))
                    )
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in done if f.exception() is not None]
            if failed:
                self.cancel.set()
                for f in futures:
                    f.cancel()
                exc = failed[0].exception()
                assert exc is not None
                raise exc

    def finish(self, state: _FileState) -> None:
        if os.path.getsize(state.part) != state.obj.size:
            raise StageError(f"s3://{self.bucket}/{state.obj.key}: size changed during download; re-run")
        if self.verify is not None:
            self.verify(state.obj, state.part)
        os.replace(state.part, state.final)
        self.journal.record(state.obj)

    def fetch(self, state: _FileState, start: int, end: int) -> None:
        if self.cancel.is_set():
            return
        try:
            fd = state.open()  # preallocates: a full disk (or file-size limit) shows here first
        except OSError as err:
            raise translate(err, f"s3://{self.bucket}/{state.obj.key}") from err
        pos, attempt = start, 0
        while pos < end:
            try:
                resp = self.client.get_object(
                    Bucket=self.bucket,
                    Key=state.obj.key,
                    Range=f"bytes={pos}-{end - 1}",
                    IfMatch=state.obj.etag,
                )
                for chunk in resp["Body"].iter_chunks(self.opts.chunk):
                    os.pwrite(fd, chunk, pos)
                    pos += len(chunk)
                    self.meter.add(len(chunk))
                    if self.cancel.is_set():
                        return
                if pos < end:
                    raise ConnectionError(f"short read at byte {pos} of {end}")
            except Exception as err:
                attempt += 1
                if not _retryable(err) or attempt >= self.opts.max_attempts:
                    raise translate(err, f"s3://{self.bucket}/{state.obj.key}") from err
                delay = min(10.0, 0.25 * 2**attempt) * (0.5 + random.random())  # noqa: S311
                log.warning(
                    "retrying s3://%s/%s at byte %d in %.1fs: %s", self.bucket, state.obj.key, pos, delay, err
                )
                time.sleep(delay)
        if state.part_done():
            self.finish(state)


def _size_is(path: str, size: int) -> bool:
    try:
        return os.path.getsize(path) == size
    except OSError:
        return False
