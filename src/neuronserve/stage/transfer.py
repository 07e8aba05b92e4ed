"""What both S3 download engines share: the objects a listing found, the transfer options, the
listing itself, and the journal that makes a killed run resume file by file.

The engines are rangedget.py (Python: parallel ranged GETs) and s5cmdcopy.py (the s5cmd binary);
s3engine.py picks one per download. A finished file is renamed to its final name and recorded in the
journal by either engine, so a run killed midway fetches only what was not finished, whichever engine
resumes it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from neuronserve.config.stage import StageOptions, parse_stage
from neuronserve.errors import StageError
from neuronserve.stage.client import translate
from neuronserve.stage.paths import JOURNAL_NAME, S3Uri, check_no_conflicts, key_to_relpath
from neuronserve.stage.progress import MIB

DEFAULT_CONCURRENCY = 16  # the Python engine's and the uploads' parallel requests (docs/PERFORMANCE.md)


@dataclass(frozen=True)
class RemoteObject:
    key: str
    rel: str
    size: int
    etag: str


@dataclass(frozen=True)
class TransferOptions:
    """How downloads and uploads run: the NEURONSERVE_S3_* settings, typed (config/stage.py), and the
    fixed tuning (chunk, attempts) the measurements in docs/PERFORMANCE.md chose."""

    concurrency: int = DEFAULT_CONCURRENCY
    part_size: int = 16 * MIB
    chunk: int = 1 * MIB
    max_attempts: int = 6
    engine: str = "auto"  # auto (s5cmd when installed) | s5cmd | python
    numworkers: int | None = None  # s5cmd `--numworkers`: only when NEURONSERVE_S3_CONCURRENCY is set

    @classmethod
    def from_options(cls, options: StageOptions) -> TransferOptions:
        return cls(
            concurrency=options.s3_concurrency or DEFAULT_CONCURRENCY,
            part_size=options.s3_part_mb * MIB,
            engine=options.s3_engine,
            numworkers=options.s3_concurrency,
        )


def options_from(environ: Mapping[str, str]) -> TransferOptions:
    """The transfer options `environ` sets, through their rows: a bad value is a ConfigError naming it."""
    return TransferOptions.from_options(parse_stage(environ))


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
        """{relative path: (size, ETag)} of every file a run finished. A torn last line (a run killed
        mid-write) is skipped and ended, so the next record starts a line of its own instead of being
        joined to it and lost."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                text = fh.read()
        except FileNotFoundError:
            return {}
        done: dict[str, tuple[int, str]] = {}
        for line in text.split("\n"):
            try:
                rec = json.loads(line)
                done[str(rec["rel"])] = (int(rec["size"]), str(rec["etag"]))
            except (ValueError, KeyError, TypeError):
                continue  # a torn line from a killed run
        if text and not text.endswith("\n"):
            with self._lock, open(self.path, "a", encoding="utf-8") as fh:
                fh.write("\n")
        return done

    def record(self, obj: RemoteObject) -> None:
        line = json.dumps({"rel": obj.rel, "size": obj.size, "etag": obj.etag}) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)


def size_of(path: str) -> int:
    """A file's size, or -1 when it is not there."""
    try:
        return os.path.getsize(path)
    except OSError:
        return -1
