"""Staging settings: how S3 downloads run, what one archive may expand to, where the hub is.

Read through their rows (hosttable.py, limitstable.py, runtimetable.py) where the settings are parsed
(`parse_settings` keeps them in `Settings.stage`), so a malformed value is a ConfigError naming the
variable (exit 2) before the front is up, not a StageError once staging has begun. Staging builds its
context from the same reader (stage/context.py), so both always agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from neuronserve.config.table import VARS


@dataclass(frozen=True)
class StageOptions:
    s3_engine: str = VARS["NEURONSERVE_S3_ENGINE"].default  # auto | s5cmd | python
    s3_concurrency: int | None = VARS["NEURONSERVE_S3_CONCURRENCY"].default  # None: each engine's own
    s3_part_mb: int = VARS["NEURONSERVE_S3_PART_MB"].default  # ranged GETs and upload parts
    archive_max_members: int = VARS["NEURONSERVE_ARCHIVE_MAX_MEMBERS"].default
    archive_max_bytes: int | None = VARS["NEURONSERVE_ARCHIVE_MAX_BYTES"].default  # None: free space
    hub_endpoint: str | None = VARS["HF_ENDPOINT"].default  # None: the public hub


def parse_stage(environ: Mapping[str, str]) -> StageOptions:
    """StageOptions from `environ`, each field through its row, checked in field order."""
    return StageOptions(
        s3_engine=VARS["NEURONSERVE_S3_ENGINE"].read(environ),
        s3_concurrency=VARS["NEURONSERVE_S3_CONCURRENCY"].read(environ),
        s3_part_mb=VARS["NEURONSERVE_S3_PART_MB"].read(environ),
        archive_max_members=VARS["NEURONSERVE_ARCHIVE_MAX_MEMBERS"].read(environ),
        archive_max_bytes=VARS["NEURONSERVE_ARCHIVE_MAX_BYTES"].read(environ),
        hub_endpoint=VARS["HF_ENDPOINT"].read(environ),
    )
