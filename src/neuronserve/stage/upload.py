"""Publishing a directory of compiled artifacts to an S3 cache entry (write-back and `cache push`).

Layout of an entry at `<prefix>/`:
    uploads/<upload_id>/<relative path>   the files of one complete upload
    .neuronserve-manifest.json            written LAST; names the upload id, sizes, ETags, SHA-256

Two writers of one key each upload under their own upload id and then replace the manifest (a single
PUT, atomic in S3): the last complete writer wins and a reader, who follows the manifest it read,
never mixes files from two uploads. Superseded uploads are left in place (a reader may still be
fetching them); clean `uploads/` ids that no manifest names with a periodic job if space matters.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from s3transfer.subscribers import BaseSubscriber

from neuronserve.errors import StageError
from neuronserve.stage import atomic
from neuronserve.stage.client import translate
from neuronserve.stage.manifest import LOCAL_COMPILE_SOURCE, FileEntry, Manifest, sha256_file, write_local
from neuronserve.stage.paths import MANIFEST_NAME, S3Uri
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.transfer import TransferOptions

log = logging.getLogger("neuronserve.stage")


def new_upload_id() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:12]}"


def publish_dir(client: Any, local_dir: str, remote: S3Uri, opts: TransferOptions) -> Manifest:
    """Upload every file of `local_dir` under a fresh upload id, then the manifest; returns it."""
    from boto3.s3.transfer import TransferConfig  # noqa: PLC0415
    from s3transfer.manager import TransferManager  # noqa: PLC0415

    remote = remote.as_prefix()
    if not os.path.isdir(local_dir):
        raise StageError(f"cannot publish {local_dir}: not a directory")
    rels = atomic.list_files(local_dir)
    if not rels:
        raise StageError(f"nothing to publish: {local_dir} has no files (did the compile write there?)")
    upload_id = new_upload_id()
    base = remote.key + f"uploads/{upload_id}/"
    sizes = {rel: os.path.getsize(os.path.join(local_dir, rel)) for rel in rels}
    total = sum(sizes.values())
    log.info(
        "publishing %d files (%.1f MiB) from %s to %s (upload %s)",
        len(rels),
        total / 2**20,
        local_dir,
        remote.uri,
        upload_id,
    )
    config = TransferConfig(
        multipart_threshold=opts.part_size,
        multipart_chunksize=opts.part_size,
        max_concurrency=opts.concurrency,
    )
    with ThreadPoolExecutor(max_workers=min(8, opts.concurrency)) as hashers:
        hashes = dict(
            zip(rels, hashers.map(lambda r: sha256_file(os.path.join(local_dir, r)), rels), strict=True)
        )
    try:
        with (
            ProgressMeter(f"publish {remote.uri}", total, None) as meter,
            TransferManager(client, config) as tm,
        ):
            futures = [
                tm.upload(
                    os.path.join(local_dir, rel), remote.bucket, base + rel, subscribers=[_Counter(meter)]
                )
                for rel in rels
            ]
            for fut in futures:
                fut.result()
        entries = []
        for rel in rels:
            head = client.head_object(Bucket=remote.bucket, Key=base + rel)
            entries.append(FileEntry(rel, sizes[rel], str(head["ETag"]).strip('"'), base + rel, hashes[rel]))
        manifest = Manifest(source=remote.uri, files=tuple(entries), upload_id=upload_id)
        client.put_object(
            Bucket=remote.bucket,
            Key=remote.key + MANIFEST_NAME,
            Body=manifest.to_json().encode(),
            ContentType="application/json",
        )
    except StageError:
        raise
    except Exception as err:
        raise translate(err, remote.uri) from err
    log.info("published %s (upload %s)", remote.uri, upload_id)
    return manifest


def mark_compiled(local_dir: str) -> None:
    """Mark a directory the engine compiled into (and then served from) as complete, manifest last."""
    rels = atomic.list_files(local_dir)
    if not rels:
        log.info("nothing compiled into %s: not marked complete", local_dir)
        return
    files = tuple(FileEntry(path=rel, size=os.path.getsize(os.path.join(local_dir, rel))) for rel in rels)
    write_local(local_dir, Manifest(source=LOCAL_COMPILE_SOURCE, files=files))
    log.info("marked %s complete (%d files): the next start on this host reuses it", local_dir, len(rels))


def mark_local(local_dir: str, manifest: Manifest) -> None:
    """After a publish, the local directory is a complete copy of the entry: the next start here is a hit."""
    write_local(local_dir, manifest)


class _Counter(BaseSubscriber):  # type: ignore[misc,unused-ignore]
    """s3transfer subscriber feeding the progress meter."""

    def __init__(self, meter: ProgressMeter) -> None:
        self._meter = meter

    def on_progress(self, future: Any, bytes_transferred: int, **kwargs: Any) -> None:
        self._meter.add(bytes_transferred)
