"""The Python download engine: every object fetched with parallel ranged GETs (boto3).

Design (measured against s5cmd, see docs/PERFORMANCE.md): one thread pool of `concurrency` workers
over a queue of byte ranges. Large objects are split into `part_size` ranges written in place with
`os.pwrite` into a pre-sized `<name>.neuronserve-part` file, so memory stays at workers x chunk no
matter how big the model. A dropped connection resumes the range from the last byte written, with
backoff; throttling (503 SlowDown) is retried by botocore's adaptive mode first, then here. A finished
file is renamed to its final name and recorded in the journal (transfer.py), so a killed run resumes
file by file.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from neuronserve.errors import StageError
from neuronserve.stage.client import translate
from neuronserve.stage.context import Batch, StageContext
from neuronserve.stage.paths import PART_SUFFIX
from neuronserve.stage.transfer import Journal, RemoteObject, size_of

log = logging.getLogger("neuronserve.stage")


def download_objects(ctx: StageContext, batch: Batch) -> int:
    """Fetch the objects not yet journaled into the batch's staging dir; returns how many were fetched."""
    journal = Journal(batch.staging_dir)
    finished = journal.load()
    todo: list[RemoteObject] = []
    for obj in batch.objects:
        path = os.path.join(batch.staging_dir, obj.rel)
        if finished.get(obj.rel) == (obj.size, obj.etag) and size_of(path) == obj.size:
            batch.meter.add(obj.size)
        else:
            todo.append(obj)
    _Download(ctx.client(), ctx, batch, journal).run(todo)
    return len(todo)


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


@dataclass
class _Download:
    """One download of a list of objects: ranged GETs of each part on a thread pool, retried with
    backoff; the first failure cancels the rest and is raised."""

    client: Any
    ctx: StageContext
    batch: Batch
    journal: Journal
    cancel: threading.Event = field(default_factory=threading.Event)

    def run(self, todo: list[RemoteObject]) -> None:
        opts = self.ctx.transfer
        with ThreadPoolExecutor(max_workers=opts.concurrency, thread_name_prefix="s3-get") as pool:
            futures = []
            for obj in todo:
                nparts = max(1, -(-obj.size // opts.part_size))
                state = _FileState(obj, self.batch.staging_dir, nparts)
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
            raise StageError(
                f"s3://{self.batch.bucket}/{state.obj.key}: size changed during download; re-run"
            )
        if self.batch.verify is not None:
            self.batch.verify(state.obj, state.part)
        os.replace(state.part, state.final)
        self.journal.record(state.obj)

    def fetch(self, state: _FileState, start: int, end: int) -> None:
        if self.cancel.is_set():
            return
        try:
            fd = state.open()  # preallocates: a full disk (or file-size limit) shows here first
        except OSError as err:
            raise translate(err, f"s3://{self.batch.bucket}/{state.obj.key}") from err
        pos, attempt = start, 0
        while pos < end:
            try:
                resp = self.client.get_object(
                    Bucket=self.batch.bucket,
                    Key=state.obj.key,
                    Range=f"bytes={pos}-{end - 1}",
                    IfMatch=state.obj.etag,
                )
                for chunk in resp["Body"].iter_chunks(self.ctx.transfer.chunk):
                    os.pwrite(fd, chunk, pos)
                    pos += len(chunk)
                    self.batch.meter.add(len(chunk))
                    if self.cancel.is_set():
                        return
                if pos < end:
                    raise ConnectionError(f"short read at byte {pos} of {end}")
            except Exception as err:
                attempt += 1
                if not _retryable(err) or attempt >= self.ctx.transfer.max_attempts:
                    raise translate(err, f"s3://{self.batch.bucket}/{state.obj.key}") from err
                delay = min(10.0, 0.25 * 2**attempt) * (0.5 + random.random())  # noqa: S311
                log.warning(
                    "retrying s3://%s/%s at byte %d in %.1fs: %s",
                    self.batch.bucket,
                    state.obj.key,
                    pos,
                    delay,
                    err,
                )
                time.sleep(delay)
        if state.part_done():
            self.finish(state)
