"""What a staging run hands down: one StageContext for the run and one Batch per download.

Why two objects instead of arguments: the S3 download is five calls deep (sources -> s3engine ->
s5cmdcopy -> the per-key pass -> collecting s5cmd's reports), and each layer took the same nine loose
arguments (client factory, bucket, objects, staging directory, options, meter, check, whole prefix,
early copy) with the raw environment travelling beside the options. Now the run's settings are read
once, through their rows, into the context; nothing below it reads the environment again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from neuronserve.config.aws import AwsSettings, parse_aws
from neuronserve.config.stage import parse_stage
from neuronserve.stage.archive import ArchiveLimits
from neuronserve.stage.client import client_for
from neuronserve.stage.hub import HubAccess
from neuronserve.stage.progress import ProgressMeter
from neuronserve.stage.s5cmdproc import S5Run, child_env
from neuronserve.stage.transfer import RemoteObject, TransferOptions
from neuronserve.types import Progress

ClientFactory = Callable[[], Any]
ProgressCb = Callable[[Progress], None] | None
Verify = Callable[[RemoteObject, str], None]  # raises StageError when a landed file is not what was listed


def lazy_client(aws: AwsSettings, pool: int) -> ClientFactory:
    """The S3 client, built on the first request only (a complete copy needs none, and boto3's import
    is a second of every start), then shared by every step of the run."""
    made: list[Any] = []

    def make() -> Any:
        if not made:
            made.append(client_for(aws, pool=pool))
        return made[0]

    return make


@dataclass(frozen=True)
class StageContext:
    """One staging run: how S3 is reached (the client, s5cmd's environment and endpoint), the transfer
    and archive options, how the hub download is started, and where progress goes."""

    client: ClientFactory
    transfer: TransferOptions = field(default_factory=TransferOptions)
    archive: ArchiveLimits = field(default_factory=ArchiveLimits)
    hub: HubAccess = field(default_factory=HubAccess)
    s5cmd_env: Mapping[str, str] = field(default_factory=dict, repr=False)  # AWS_* and proxies only
    endpoint: str | None = None  # the S3 endpoint (s5cmd `--endpoint-url`); None: AWS's own
    progress: ProgressCb = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], progress: ProgressCb = None) -> StageContext:
        """The context `environ` configures (a malformed setting is the ConfigError naming it, as at
        settings time: config/stage.py and config/aws.py read the same rows)."""
        options = parse_stage(environ)
        transfer = TransferOptions.from_options(options)
        aws = parse_aws(environ)
        return cls(
            client=lazy_client(aws, transfer.concurrency + 4),
            transfer=transfer,
            archive=ArchiveLimits.from_options(options),
            hub=HubAccess.from_environ(environ, options.hub_endpoint),
            s5cmd_env=child_env(environ),
            endpoint=aws.s3_endpoint,
            progress=progress,
        )


@dataclass(frozen=True)
class Batch:
    """One download: these objects of `bucket` into `staging_dir`, counted on `meter`.

    `verify` checks each landed file before it is journaled (the cache's SHA-256); `whole_prefix` says
    the objects are everything under their common prefix (a listing), so one wildcard copy may fetch
    them; `early` is a wildcard copy already started into a fresh `staging_dir` (s3engine.py).
    """

    bucket: str
    objects: Sequence[RemoteObject]
    staging_dir: str
    meter: ProgressMeter
    verify: Verify | None = None
    whole_prefix: bool = False
    early: S5Run | None = None
